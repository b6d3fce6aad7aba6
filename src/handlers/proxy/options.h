// A proxy route's options.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace peregrine::proxy {

enum class ProxyHostMode { kPass, kUpstream, kFixed };

struct ProxyOptions : config::HandlerOptions {
  std::string upstream;  // group name in Config::upstreams
  std::string scheme = "http";
  // The route's prefix (an exact route: its whole path) replaced by `path` (or stripped); ""
  // for extension and regex routes, which keep the request path.
  std::string path_prefix;
  std::string path;  // upstream path replacing path_prefix; "" keeps the request path
  bool strip_prefix = false;
  // The Host header sent to the back end (proxy_host): the client's, the group's name or
  // address, or `fixed_host`.
  ProxyHostMode host_mode = ProxyHostMode::kPass;
  std::string fixed_host;  // kFixed: "app.internal", "app.internal:8080"
  bool x_forwarded_for = true;
  bool x_forwarded_proto = true;
  bool x_forwarded_host = true;
  bool x_real_ip = true;
  bool forwarded = false;
  std::vector<std::string> request_remove;
  std::vector<std::pair<std::string, std::string>> request_set;
  std::vector<std::pair<std::string, std::string>> request_add;
  std::vector<std::string> response_remove;
  std::vector<std::pair<std::string, std::string>> response_set;
  std::vector<std::pair<std::string, std::string>> response_add;
  bool rewrite_location = true;
  bool intercept_errors = false;      // upstream 4xx/5xx answered with the site's error pages
  uint64_t buffer_bytes = 64 * 1024;  // in-memory response buffer for slow clients
  // Beyond the memory buffer, the response spills to a temporary file up to this; 0 = never.
  uint64_t max_temp_file_bytes = 1 << 30;
  bool websocket = true;  // tunnel Upgrade requests
  config::Millis tunnel_idle_timeout{300'000};
};

}  // namespace peregrine::proxy
