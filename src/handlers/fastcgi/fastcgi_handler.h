// The FastCGI gateway (php-fpm): maps a request to a script (split path, index files, try_files
// front controller), forwards it over a pooled FCGI_KEEP_CONN connection with the CGI parameters,
// streams the request body as STDIN, and turns STDOUT into the HTTP response (buffered up to
// `buffer_bytes` so it gets a Content-Length, streamed beyond). One instance per route per worker.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "config/config.h"
#include "handlers/fastcgi/options.h"
#include "handlers/fastcgi/protocol.h"
#include "handlers/static/static_handler.h"
#include "handlers/stream_handler.h"
#include "peregrine/handler.h"
#include "upstream/group_runtime.h"

namespace peregrine::fastcgi {

class FastcgiExchange;

// Where a request goes once the path has been mapped.
struct Target {
  enum class Kind : uint8_t { kScript, kStatic, kNotFound } kind = Kind::kNotFound;
  std::string script_name;  // "/index.php"
  std::string path_info;    // "/extra/path" (may be empty)
  std::string query;        // QUERY_STRING
  std::string static_path;  // kStatic: the file or directory to serve
  int status = 404;         // kNotFound: the status to answer ("=403" in try_files)
};

// The default split_path (config::kDefaultSplitPath, "^(.+?\.php)(/.*)?$") without pcre2: the
// same answer for every path without a line break.
bool split_default(std::string_view uri, std::string_view& script_name,
                   std::string_view& path_info);

class FastcgiHandler final : public handlers::StreamHandler {
 public:
  FastcgiHandler(const config::Route& route, const config::Site& site,
                 upstream::GroupRuntime& group, const static_files::MimeTable& mime,
                 const handlers::WorkerEnv& env);
  ~FastcgiHandler() override;
  bool ok() const { return root_fd_ >= 0; }

  handlers::Exchange* start(const Request& request, handlers::Downstream& downstream) override;

  // Pure enough to test: the path mapping against the files under the root.
  Target resolve(const Request& request);

 private:
  friend class FastcgiExchange;
  enum class Kind : uint8_t { kMissing, kFile, kDirectory };
  Kind stat_path(std::string_view rel_path);
  bool split(std::string_view uri, Target& target) const;
  bool is_script(std::string_view uri) const;
  bool try_index(std::string_view dir_uri, Target& target);

  const config::Route& route_;
  const FastcgiOptions& options_;
  const config::Site& site_;
  upstream::GroupRuntime& group_;
  handlers::WorkerEnv env_;
  std::string root_;
  int root_fd_ = -1;
  bool default_split_ = false;  // split_path is config::kDefaultSplitPath: see split()
  std::unique_ptr<static_files::StaticHandler> files_;  // non-script files (try_files, indexes)
  Response static_response_;
  struct StatEntry {
    Kind kind;
    int64_t checked_at_ms;
  };
  std::unordered_map<std::string, StatEntry> stats_;
  std::string scratch_;
  ParamsBuilder params_;                 // every exchange's PARAMS, encoded (reused buffer)
  std::string fixed_params_;             // encoded name-value pairs sent with every request
  std::string extra_params_;             // the route's fastcgi_params, encoded
  std::unique_ptr<char[]> read_buffer_;  // every exchange's reads; decoded before the next one
  FastcgiExchange* carriers_ = nullptr;  // requests that could take a follower (pipelining)
};

}  // namespace peregrine::fastcgi
