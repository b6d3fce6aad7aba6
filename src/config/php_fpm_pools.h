// How many connections a php-fpm pool serves at once, read from the configuration of the running
// php-fpm master that listens on an address. Quick mode (--fastcgi ADDR) caps its connections
// there, and a cap is what makes kept connections safe: a php-fpm child serves one connection
// at a time, so a kept connection beyond pm.max_children would leave the request sent on it in
// php-fpm's backlog until some other connection closed.
//
// php-fpm itself cannot be asked: to FCGI_GET_VALUES it answers FCGI_MPXS_CONNS only (checked
// with php-fpm 8.2), never FCGI_MAX_CONNS. Its master process names its configuration file in
// its title ("php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)"), readable by anyone in
// /proc/PID/cmdline, and that file (with its includes) holds each pool's listen and
// pm.max_children.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"

namespace peregrine::config {

struct FpmPool {
  std::string name;
  std::string listen;         // as written, with $pool replaced
  uint32_t max_children = 0;  // 0: not set
  std::string file;           // where the pool was read
};

// The files an `include` pattern (a glob, made absolute by the caller's rules) names, and their
// text: (path, text) pairs.
using IncludeReader =
    std::function<std::vector<std::pair<std::string, std::string>>(const std::string& pattern)>;

// Pure: the pools of one php-fpm configuration text (PHP's ini syntax: [global] and [pool]
// sections, key = value, ';' and '#' comments, quoted values, $pool in values). `include` lines
// are followed through `read_include` (at most a few levels deep); a relative pattern is relative
// to the directory of `file`.
std::vector<FpmPool> parse_fpm_pools(std::string_view text, const std::string& file,
                                     const IncludeReader& read_include);

// Does php-fpm's `listen` value ("/run/php/fpm.sock", "127.0.0.1:9000", "[::1]:9000", "9000")
// name an endpoint that `server` connects to? Unix socket paths match as the same file.
bool fpm_listen_matches(std::string_view listen, const UpstreamServer& server);

struct FpmLimit {
  uint32_t max_children = 0;
  std::string pool;
  std::string file;
};

// The running php-fpm masters' pools, the one listening on `server`: its pm.max_children.
// Nothing when no master is found, its configuration cannot be read, or no pool matches.
std::optional<FpmLimit> find_fpm_limit(const UpstreamServer& server);

}  // namespace peregrine::config
