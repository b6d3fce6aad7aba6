// The validated, immutable configuration snapshot. Loaded once (from TOML or the command line),
// shared read-only by all workers, replaced as a whole on SIGHUP.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/regex.h"

namespace peregrine::config {

using Millis = std::chrono::milliseconds;

// Where a value came from, for messages of the form file:line:col.
struct SourcePos {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
};

struct ListenAddress {
  std::string text;  // as written: "127.0.0.1:8080", "[::1]:8080", "*:80"
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  int backlog = 4096;
  SourcePos pos;
};

struct Limits {
  Millis header_timeout{20'000};      // whole request head must arrive within this (slowloris)
  Millis keepalive_timeout{75'000};   // idle time between requests on a kept-alive connection
  Millis body_timeout{60'000};        // between two reads of a request body
  Millis send_timeout{60'000};        // between two successful writes to a slow client
  Millis shutdown_timeout{30'000};    // graceful stop (SIGQUIT) gives in-flight requests this long
  uint32_t max_connections = 16384;   // whole server; each worker takes its share
  uint32_t max_header_bytes = 16384;  // request line + headers
  uint64_t max_body_bytes = 1 << 20;  // 413 beyond
  uint32_t max_requests_per_connection = 1000;
};

enum class AccessLogFormat { kCombined, kJson, kOff };

struct AccessLog {
  AccessLogFormat format = AccessLogFormat::kCombined;
  std::string path;  // "" or "stdout"/"stderr"; ignored when kOff
};

struct StaticOptions {
  std::string root;    // directory the request path maps into (absolute)
  bool alias = false;  // true: the route's matched prefix is replaced by root (nginx `alias`)
  std::vector<std::string> index{"index.html"};
  bool directory_listing = false;
  bool dotfiles = false;  // serve names starting with '.' (except .well-known, always allowed)
  bool symlinks_outside_root = false;  // follow symlinks that leave the root
  bool precompressed = true;           // serve NAME.br / NAME.gz when the client accepts them
  bool etag = true;
  Millis cache_valid{1000};  // how long a cached stat() result is trusted
};

struct ReturnOptions {
  int status = 200;
  std::string body;
  std::string location;  // for 301/302/303/307/308; $1..$9 are regex captures, $uri the path
  std::string content_type = "text/plain";
};

enum class MatchKind { kExact, kPrefix, kExtension, kRegex };
enum class HandlerKind { kStatic, kReturn, kApplication };

struct Route {
  MatchKind match = MatchKind::kPrefix;
  std::string pattern;                 // exact path, prefix, extension (without dot) or regex
  std::shared_ptr<const Regex> regex;  // compiled, for kRegex
  HandlerKind handler = HandlerKind::kStatic;
  std::string handler_name;  // kApplication: the name an embedding program registered
  StaticOptions static_files;
  ReturnOptions return_options;
  std::vector<std::string> methods;  // allowed methods; empty = the handler's default
  SourcePos pos;
};

struct Site {
  std::vector<std::string> hosts;  // lower-case; "*.example.com" wildcards allowed
  bool is_default = false;
  StaticOptions static_files;  // the site's root and defaults, inherited by its static routes
  std::vector<Route> routes;   // first match wins, in declared order
  std::map<int, std::string> error_pages;  // status -> path under the site root
  AccessLog access_log;
  SourcePos pos;
};

enum class LogLevel { kDebug, kInfo, kWarn, kError };

struct Config {
  std::string source;  // file path, or "<command line>"
  std::vector<ListenAddress> listen;
  int workers = 0;    // 0: one per core
  std::string user;   // drop privileges to this user after binding, when started as root
  std::string group;  // default: the user's primary group
  std::string pid_file;
  std::string error_log = "stderr";
  LogLevel log_level = LogLevel::kInfo;
  std::string server_header = "peregrine";  // Server: value; "" sends none
  Limits limits;
  std::map<std::string, std::string> mime_types;  // extension (no dot, lower-case) -> type
  std::vector<Site> sites;
  size_t default_site = 0;  // index into sites
};

struct ConfigError {
  SourcePos pos;
  std::string message;
  std::string hint;  // may be empty
  // "file:line:col: error: message (hint: ...)"
  std::string to_string() const;
};

struct LoadResult {
  std::shared_ptr<const Config> config;  // null when errors is not empty
  std::vector<ConfigError> errors;
};

LoadResult load_file(const std::string& path);
LoadResult load_string(std::string_view toml_text, const std::string& source_name);

}  // namespace peregrine::config
