// A fastcgi route's options (its static options are the route's static_files).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/regex.h"

namespace peregrine::fastcgi {

struct FastcgiOptions : config::HandlerOptions {
  std::string upstream;  // name of the group in Config::upstreams
  std::string root;      // DOCUMENT_ROOT / SCRIPT_FILENAME base (absolute); default: site root
  std::vector<std::string> index{"index.php"};  // for paths ending in '/'
  // Splits the path into SCRIPT_NAME and PATH_INFO: two capture groups. Default: up to and
  // including the first ".php" segment.
  std::shared_ptr<const Regex> split_path;
  // Front controller: tried in order, first existing wins; the last entry is the fallback URI
  // ("/index.php?$args"), or "=404". Empty: the script must exist (404 otherwise).
  std::vector<std::string> try_files;
  std::vector<std::pair<std::string, std::string>> params;  // extra, set after the standard ones
  uint64_t buffer_bytes = 64 * 1024;  // responses up to this get a Content-Length; larger stream
  bool check_script = true;           // 404 from us when SCRIPT_FILENAME does not exist
  // GET/HEAD requests that would wait for a slot are sent behind the request in progress on a
  // kept connection, so php-fpm's child finds the next one without waiting for us.
  bool pipelining = true;
};

}  // namespace peregrine::fastcgi
