// The command line of the `peregrine` binary, and the configuration snapshot it implies:
// either a TOML file (-c FILE, with a few overrides) or "quick mode", one site built from the
// options alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace peregrine::config {

struct CommandLine {
  bool help = false, version = false, test_only = false;  // -h/--help, -v/--version, -t
  std::string config_file;                                // -c FILE
  std::vector<std::string> listen;                        // --listen ADDR (repeatable)
  std::string root;                                       // --root DIR
  int workers = -1;                                       // --workers N (-1: not given)
  std::string access_log;                                 // --access-log off|PATH|stdout
  std::string pid_file;                                   // --pid-file PATH
  std::string error_log;                                  // --error-log PATH
  std::string log_level;                                  // --log-level L
  std::string event_backend;                              // --event-backend B
  std::string user;                                       // --user NAME
  std::string fastcgi;             // --fastcgi ADDR: every path to php-fpm (needs --root)
  std::string fastcgi_conns;       // --fastcgi-conns N: the cap on connections to it ("" = find)
  std::vector<std::string> proxy;  // --proxy URL | --proxy /prefix/=URL (repeatable)
  std::vector<std::string> ajp;    // --ajp ajp://ADDR | --ajp /prefix/=ajp://ADDR (repeatable)
  std::string ajp_secret_file;     // --ajp-secret-file FILE|none: the AJP connector's secret
  bool compress = false;           // --compress: on-the-fly compression with the defaults
  std::string max_body;            // --max-body SIZE: limits.max_body_bytes ("" = the default)
  std::string tls_cert;            // --tls-cert PEM: every --listen serves TLS with it
  std::string tls_key;             // --tls-key PEM
  bool tls_self_signed = false;    // --tls-self-signed: a certificate made in memory
  std::string admin;               // --admin ADDR: the admin API listener (quick mode)
  // --route 'KEY = VALUE, ...' (repeatable): the keys of one [[site.route]], for any handler the
  // program knows, read by the file's reader; before the routes the other options make.
  std::vector<std::string> routes;
};

struct CommandLineResult {
  CommandLine cli;
  std::string error;  // non-empty: print it and usage(), exit 2
};

// Accepts "--opt value" and "--opt=value" (and "-c FILE" / "-cFILE"). Later values of a
// single-valued option replace earlier ones; --listen and --proxy accumulate.
CommandLineResult parse_command_line(int argc, const char* const* argv);

std::string usage();

// From the file when -c is given (then --workers, --pid-file, --error-log, --log-level, --user,
// --event-backend and --access-log override the file's values; --listen/--root with -c is an
// error). Otherwise quick mode: listen = --listen values or 127.0.0.1:8080; one default site
// serving --root, or
// ./www when it exists, or else a built-in welcome page. --fastcgi ADDR (with --root) sends every
// path to a FastCGI back end with a front controller (try_files $uri $uri/ /index.php?$args);
// --proxy URL (several: one round-robin group) proxies every path; --proxy /prefix/=URL proxies
// one prefix (stripped) before the rest. --max-body SIZE is the largest request body (default:
// the file's default, or kQuickFastcgiMaxBody with --fastcgi). Access log: combined to stdout
// unless --access-log says otherwise. The routes and limits are read by the same readers as a
// file's, from tables built here, so they get the same defaults and checks. `handlers`: the
// route handlers a file (or quick mode) may use (handlers::builtin() for the server's).
LoadResult build_config(const CommandLine& cli, const HandlerSet& handlers);

// The cap on connections to a --fastcgi back end when no --fastcgi-conns is given and no running
// php-fpm pool listening there says its pm.max_children (config/php_fpm_pools.h): the
// pm.max_children Debian's and PHP's own www.conf ship with.
inline constexpr uint32_t kQuickFastcgiDefaultConns = 5;
// After build_config with --tls-self-signed: the certificate's SHA-256 fingerprint (made once
// per process, so a reload keeps the certificate the user has just trusted).
std::string self_signed_fingerprint();

// The body limit of a quick-mode PHP site: WordPress media uploads (a few MB of photos) must
// reach PHP, whose post_max_size/upload_max_filesize then decide; a lower limit here would
// answer a bare 413 that the application cannot explain. Common WordPress guides raise
// php.ini's limits to 64M (Debian ships post_max_size = 8M), so 64m leaves PHP the last word.
inline constexpr std::string_view kQuickFastcgiMaxBody = "64m";

}  // namespace peregrine::config
