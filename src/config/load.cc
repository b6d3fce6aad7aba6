// TOML -> validated Config. Every problem becomes a ConfigError at the file:line:col of the
// offending key or value (of the enclosing table for a missing key); all of them are collected,
// sorted by position, and no Config is built unless there are none. Nothing here throws.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/listen_address.h"
#include "config/units.h"
#include "config/upstream_address.h"
#include "config/validate.h"
#include "http/header_names.h"

namespace peregrine::config {

namespace {

using detail::closest_match;
using detail::has_control_chars;
using detail::to_lower;
using namespace std::string_literals;

constexpr Millis kMaxDuration{24 * 60 * 60 * 1000};
constexpr int kMaxWorkers = 256;
constexpr int64_t kMaxBacklog = 65535;
constexpr int64_t kMaxConnections = 1 << 20;

const std::vector<std::string_view> kTopKeys = {
    "listen",    "workers",       "user",   "group",      "pid_file", "error_log",
    "log_level", "server_header", "limits", "mime_types", "upstream", "site"};
const std::vector<std::string_view> kLimitKeys = {
    "header_timeout",   "keepalive_timeout", "body_timeout",
    "send_timeout",     "shutdown_timeout",  "max_connections",
    "max_header_bytes", "max_body_bytes",    "max_requests_per_connection"};
const std::vector<std::string_view> kListenKeys = {"address", "backlog", "mode", "owner", "group"};
const std::vector<std::string_view> kStaticKeys = {
    "root",          "index", "directory_listing", "dotfiles", "symlinks_outside_root",
    "precompressed", "etag",  "cache_valid"};
const std::vector<std::string_view> kSiteKeys = {"hosts",
                                                 "default",
                                                 "root",
                                                 "index",
                                                 "directory_listing",
                                                 "dotfiles",
                                                 "symlinks_outside_root",
                                                 "precompressed",
                                                 "etag",
                                                 "cache_valid",
                                                 "access_log",
                                                 "access_log_format",
                                                 "error_pages",
                                                 "route"};
const std::vector<std::string_view> kMatchKeys = {"exact", "prefix", "extension", "regex"};
const std::vector<std::string_view> kFastcgiKeys = {
    "fastcgi",        "split_path",   "try_files",         "fastcgi_params",
    "fastcgi_buffer", "check_script", "fastcgi_pipelining"};
const std::vector<std::string_view> kProxyKeys = {"proxy",
                                                  "strip_prefix",
                                                  "proxy_host",
                                                  "x_forwarded",
                                                  "forwarded",
                                                  "request_headers",
                                                  "response_headers",
                                                  "rewrite_location",
                                                  "intercept_errors",
                                                  "proxy_buffer",
                                                  "proxy_temp_file_max",
                                                  "websocket",
                                                  "tunnel_timeout"};
const std::vector<std::string_view> kRouteKeys = [] {
  std::vector<std::string_view> keys = {
      "exact",         "prefix", "extension",         "regex",    "return",
      "location",      "body",   "content_type",      "handler",  "root",
      "alias",         "index",  "directory_listing", "dotfiles", "symlinks_outside_root",
      "precompressed", "etag",   "cache_valid",       "methods"};
  keys.insert(keys.end(), kFastcgiKeys.begin(), kFastcgiKeys.end());
  keys.insert(keys.end(), kProxyKeys.begin(), kProxyKeys.end());
  return keys;
}();
const std::vector<std::string_view> kUpstreamKeys = {
    "name",         "balance",       "hash_key",          "max_fails",
    "fail_timeout", "keepalive",     "keepalive_timeout", "keepalive_requests",
    "queue",        "queue_timeout", "connect_timeout",   "send_timeout",
    "read_timeout", "tries",         "try_timeout",       "servers",
    "server",       "health_check"};
const std::vector<std::string_view> kUpstreamServerKeys = {"address", "weight", "backup",
                                                           "max_conns"};
const std::vector<std::string_view> kHealthCheckKeys = {"path",   "host", "interval", "timeout",
                                                        "status", "rise", "fall"};
const std::vector<std::string_view> kBalanceNames = {"round_robin", "least_conn", "ip_hash",
                                                     "hash"};
const std::vector<std::string_view> kHeaderRuleKeys = {"set", "add", "remove"};

constexpr uint64_t kMaxResponseBuffer = uint64_t{64} << 20;
constexpr int64_t kMaxQueue = 1 << 20;
constexpr int64_t kMaxConnsPerServer = 1 << 20;

bool contains(const std::vector<std::string_view>& list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

std::string join(const std::vector<std::string_view>& words) {
  std::string out;
  for (std::string_view w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

std::string type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "nothing";
  }
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// A host as the Host header carries it, minus the port: "example.com", "*.example.com",
// "127.0.0.1", "[::1]". Lower-cases *host in place. Returns "" when valid, else the problem.
std::string check_host(std::string* host, std::string* hint) {
  std::string& h = *host;
  h = to_lower(h);
  if (h.empty()) return "empty host name";
  if (h == "*") {
    *hint = "omit 'hosts' (or leave it empty) to match any host";
    return "'*' alone is not a host pattern";
  }
  if (h.front() == '[') {
    size_t close = h.find(']');
    if (close != std::string::npos && close + 1 < h.size()) {
      *hint = "the port of the Host header is ignored when choosing a site; write '" +
              h.substr(0, close + 1) + "'";
      return "ports are not allowed in host names ('" + h + "')";
    }
    in6_addr ip{};
    if (close == h.size() - 1 && inet_pton(AF_INET6, h.substr(1, close - 1).c_str(), &ip) == 1) {
      return "";
    }
    *hint = "IPv6 literals are written in brackets, e.g. '[::1]'";
    return "invalid host name '" + h + "'";
  }
  if (size_t colon = h.find(':'); colon != std::string::npos) {
    if (all_digits(std::string_view(h).substr(colon + 1)) &&
        h.find(':', colon + 1) == std::string::npos) {
      *hint = "the port of the Host header is ignored when choosing a site; write '" +
              h.substr(0, colon) + "'";
      return "ports are not allowed in host names ('" + h + "')";
    }
    *hint = "IPv6 literals are written in brackets, e.g. '[::1]'";
    return "invalid host name '" + h + "'";
  }
  if (h.size() > 1 && h.back() == '.') h.pop_back();  // "example.com." is "example.com"
  std::string_view name = h;
  if (name.starts_with("*.")) name.remove_prefix(2);
  if (name.find('*') != std::string_view::npos) {
    *hint = "only a leading wildcard label is supported, as in '*.example.com'";
    return "invalid wildcard in host name '" + h + "'";
  }
  if (name.empty() || name.size() > 253) return "invalid host name '" + h + "'";
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return "invalid host name '" + h + "' (empty label)";
      label = 0;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) {
      *hint = "host names use letters, digits, '-' and '.'";
      return "invalid character '" + std::string(1, c) + "' in host name '" + h + "'";
    }
    if (++label > 63) return "invalid host name '" + h + "' (label longer than 63)";
  }
  if (label == 0) return "invalid host name '" + h + "' (empty label)";
  return "";
}

class Loader {
 public:
  Loader(std::string file, std::string base_dir)
      : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  LoadResult run(std::string_view text) {
    LoadResult result;
    try {
      toml::table root;
      try {
        root = toml::parse(text, std::string_view(file_));
      } catch (const toml::parse_error& e) {
        std::string description(e.description());
        constexpr std::string_view kPrefix = "Error while parsing ";
        if (description.starts_with(kPrefix)) {
          description = "TOML syntax error while parsing " + description.substr(kPrefix.size());
        } else {
          description = "TOML syntax error: " + description;
        }
        error(e.source(), description);
        result.errors = std::move(errors_);
        return result;
      }
      config_.source = file_;
      load_root(root);
    } catch (const std::exception& e) {
      errors_.push_back({SourcePos{file_, 0, 0}, "internal error while loading: "s + e.what(), ""});
    } catch (...) {
      errors_.push_back({SourcePos{file_, 0, 0}, "internal error while loading", ""});
    }
    if (!errors_.empty()) {
      std::stable_sort(
          errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
            return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
          });
      result.errors = std::move(errors_);
      return result;
    }
    result.config = std::make_shared<Config>(std::move(config_));
    return result;
  }

 private:
  SourcePos pos_of(const toml::source_region& region) const {
    return SourcePos{file_, region.begin.line, region.begin.column};
  }

  void error(const toml::source_region& where, std::string message, std::string hint = {}) {
    errors_.push_back({pos_of(where), std::move(message), std::move(hint)});
  }
  void error(const SourcePos& where, std::string message, std::string hint = {}) {
    errors_.push_back({where, std::move(message), std::move(hint)});
  }

  // Unknown keys, with a spelling suggestion or a note on where the key does belong.
  void check_keys(const toml::table& table, const std::vector<std::string_view>& allowed,
                  std::string_view section) {
    for (auto&& [key, value] : table) {
      std::string_view name = key.str();
      if (contains(allowed, name)) continue;
      std::string where = section.empty() ? "at the top level" : "in " + std::string(section);
      std::string hint;
      std::string suggestion = closest_match(name, allowed);
      if (!suggestion.empty()) {
        hint = "did you mean '" + suggestion + "'?";
      } else if (!section.empty() && contains(kTopKeys, name)) {
        hint = "'" + std::string(name) +
               "' is a top-level key; keys after a [section] header belong to that section, so "
               "move it above the first one";
      } else if (section != "[limits]" && contains(kLimitKeys, name)) {
        hint = "'" + std::string(name) + "' belongs in [limits]";
      } else if (section.empty() && (contains(kSiteKeys, name) || contains(kRouteKeys, name))) {
        hint = "'" + std::string(name) + "' is set on a [[site]] (or a [[site.route]])";
      } else if (section == "[[site]]" && contains(kRouteKeys, name)) {
        hint = "'" + std::string(name) + "' belongs in a [[site.route]] table";
      } else if (section == "[[site.route]]" && contains(kSiteKeys, name)) {
        hint = "'" + std::string(name) + "' is set on the [[site]], not on a route";
      } else if (section == "[[site.route]]" && contains(kUpstreamKeys, name)) {
        hint = "'" + std::string(name) +
               "' is set on an [[upstream]] group; name the group in the route's fastcgi or proxy";
      } else if (section == "[[upstream]]" && contains(kRouteKeys, name)) {
        hint = "'" + std::string(name) + "' is set on a [[site.route]], not on an [[upstream]]";
      } else {
        hint = "valid keys: " + join(allowed);
      }
      error(key.source(), "unknown key '" + std::string(name) + "' " + where, hint);
    }
  }

  void type_error(const toml::node& node, std::string_view name, std::string_view expected,
                  std::string hint = {}) {
    std::string got = type_name(node.type());
    if (const auto* s = node.as_string()) {
      got += " (\"" + s->get() + "\")";
      if (hint.empty() && (expected.find("integer") != std::string_view::npos) &&
          all_digits(s->get())) {
        hint = "write numbers without quotes";
      }
      if (hint.empty() && expected == "a boolean" && (s->get() == "true" || s->get() == "false")) {
        hint = "write true or false without quotes";
      }
    }
    error(node.source(),
          "'" + std::string(name) + "' must be " + std::string(expected) + ", not " + got, hint);
  }

  bool read_string(const toml::node& node, std::string_view name, std::string* out,
                   bool allow_empty = true) {
    const auto* s = node.as_string();
    if (s == nullptr) {
      type_error(node, name, "a string");
      return false;
    }
    if (!allow_empty && s->get().empty()) {
      error(node.source(), "'" + std::string(name) + "' must not be empty");
      return false;
    }
    *out = s->get();
    return true;
  }

  bool read_bool(const toml::node& node, std::string_view name, bool* out) {
    const auto* b = node.as_boolean();
    if (b == nullptr) {
      type_error(node, name, "a boolean");
      return false;
    }
    *out = b->get();
    return true;
  }

  bool read_int(const toml::node& node, std::string_view name, int64_t lo, int64_t hi,
                int64_t* out) {
    const auto* i = node.as_integer();
    if (i == nullptr) {
      type_error(node, name, "an integer");
      return false;
    }
    if (i->get() < lo || i->get() > hi) {
      error(node.source(), "'" + std::string(name) + "' is " + std::to_string(i->get()) +
                               "; it must be between " + std::to_string(lo) + " and " +
                               std::to_string(hi));
      return false;
    }
    *out = i->get();
    return true;
  }

  bool read_duration(const toml::node& node, std::string_view name, Millis lo, Millis hi,
                     Millis* out) {
    Millis value{};
    if (const auto* i = node.as_integer()) {
      int64_t seconds = i->get();
      if (seconds < 0 || seconds > hi.count() / 1000) {
        error(node.source(), "'" + std::string(name) + "' is " + std::to_string(seconds) +
                                 " seconds; it must be between " + format_duration(lo) + " and " +
                                 format_duration(hi));
        return false;
      }
      value = Millis(seconds * 1000);
    } else if (const auto* s = node.as_string()) {
      if (!parse_duration(s->get(), &value)) {
        error(node.source(),
              "invalid duration \"" + s->get() + "\" for '" + std::string(name) + "'",
              std::string(kDurationForms));
        return false;
      }
    } else {
      type_error(node, name, "a duration (string or integer seconds)", std::string(kDurationForms));
      return false;
    }
    if (value < lo || value > hi) {
      error(node.source(), "'" + std::string(name) + "' is " + format_duration(value) +
                               "; it must be between " + format_duration(lo) + " and " +
                               format_duration(hi));
      return false;
    }
    *out = value;
    return true;
  }

  bool read_size(const toml::node& node, std::string_view name, uint64_t lo, uint64_t hi,
                 uint64_t* out) {
    uint64_t value = 0;
    if (const auto* i = node.as_integer()) {
      if (i->get() < 0) {
        error(node.source(), "'" + std::string(name) + "' must not be negative");
        return false;
      }
      value = static_cast<uint64_t>(i->get());
    } else if (const auto* s = node.as_string()) {
      if (!parse_size(s->get(), &value)) {
        error(node.source(), "invalid size \"" + s->get() + "\" for '" + std::string(name) + "'",
              std::string(kSizeForms));
        return false;
      }
    } else {
      type_error(node, name, "a size (integer bytes or string)", std::string(kSizeForms));
      return false;
    }
    if (value < lo || value > hi) {
      error(node.source(), "'" + std::string(name) + "' is " + format_size(value) +
                               "; it must be between " + format_size(lo) + " and " +
                               format_size(hi));
      return false;
    }
    *out = value;
    return true;
  }

  // A string or an array of strings; each element with its node, for positions.
  bool read_string_list(const toml::node& node, std::string_view name,
                        std::vector<std::pair<std::string, const toml::node*>>* out) {
    out->clear();
    if (const auto* s = node.as_string()) {
      out->emplace_back(s->get(), &node);
      return true;
    }
    const auto* array = node.as_array();
    if (array == nullptr) {
      type_error(node, name, "a string or an array of strings");
      return false;
    }
    bool ok = true;
    for (const toml::node& element : *array) {
      if (const auto* s = element.as_string()) {
        out->emplace_back(s->get(), &element);
      } else {
        error(element.source(), "entries of '" + std::string(name) + "' must be strings, not " +
                                    type_name(element.type()));
        ok = false;
      }
    }
    return ok;
  }

  // ---- top level ----

  void load_root(const toml::table& root) {
    check_keys(root, kTopKeys, "");

    if (const toml::node* node = root.get("listen")) {
      load_listen(*node);
    } else {
      ListenAddress address;
      std::string message, hint;
      parse_listen_address("127.0.0.1:8080", &address, &message, &hint);
      address.pos = pos_of(root.source());
      config_.listen.push_back(std::move(address));
    }

    if (const toml::node* node = root.get("workers")) {
      constexpr std::string_view kExpected = "an integer 1..256 or \"auto\"";
      if (const auto* s = node->as_string()) {
        if (s->get() == "auto") {
          config_.workers = 0;
        } else {
          type_error(*node, "workers", kExpected,
                     all_digits(s->get()) ? "write numbers without quotes" : "");
        }
      } else if (const auto* i = node->as_integer(); i != nullptr && i->get() == 0) {
        error(node->source(), "'workers' is 0; it must be between 1 and 256",
              "write \"auto\" for one worker per core");
      } else if (node->is_integer()) {
        int64_t n = 0;
        if (read_int(*node, "workers", 1, kMaxWorkers, &n)) config_.workers = static_cast<int>(n);
      } else {
        type_error(*node, "workers", kExpected);
      }
    }

    if (const toml::node* node = root.get("user")) {
      if (read_string(*node, "user", &config_.user, false) && !detail::user_exists(config_.user)) {
        error(node->source(), "user '" + config_.user + "' does not exist",
              "create it (e.g. useradd --system " + config_.user + ") or name an existing user");
      }
    }
    if (const toml::node* node = root.get("group")) {
      if (read_string(*node, "group", &config_.group, false) &&
          !detail::group_exists(config_.group)) {
        error(node->source(), "group '" + config_.group + "' does not exist");
      }
      if (root.get("user") == nullptr) {
        error(node->source(), "'group' is set without 'user'",
              "privileges are dropped only to a user; add user = \"...\"");
      }
    }
    if (const toml::node* node = root.get("pid_file")) {
      std::string value;
      if (read_string(*node, "pid_file", &value)) {
        config_.pid_file = value.empty() ? "" : detail::absolute_path(value, base_dir_);
      }
    }
    if (const toml::node* node = root.get("error_log")) {
      std::string value;
      if (read_string(*node, "error_log", &value, false)) {
        if (value == "stderr" || value == "stdout") {
          config_.error_log = value;
        } else if (value == "off") {
          error(node->source(), "'error_log' cannot be \"off\"",
                "errors always go somewhere: write \"stderr\", \"stdout\" or a file path");
        } else {
          config_.error_log = detail::absolute_path(value, base_dir_);
        }
      }
    }
    if (const toml::node* node = root.get("log_level")) {
      std::string value;
      if (read_string(*node, "log_level", &value) &&
          !detail::parse_log_level(value, &config_.log_level)) {
        std::string suggestion = closest_match(value, detail::kLogLevels);
        error(node->source(), "unknown log level \"" + value + "\"",
              suggestion.empty() ? "one of: debug, info, warn, error"
                                 : "did you mean '" + suggestion + "'?");
      }
    }
    if (const toml::node* node = root.get("server_header")) {
      std::string value;
      if (read_string(*node, "server_header", &value)) {
        if (has_control_chars(value)) {
          error(node->source(), "'server_header' contains control characters");
        } else {
          config_.server_header = value;
        }
      }
    }

    if (const toml::node* node = root.get("limits")) {
      if (const auto* table = node->as_table()) {
        load_limits(*table);
      } else {
        type_error(*node, "limits", "a table", "write a [limits] section");
      }
    }
    if (const toml::node* node = root.get("mime_types")) {
      if (const auto* table = node->as_table()) {
        load_mime_types(*table);
      } else {
        type_error(*node, "mime_types", "a table", "write a [mime_types] section");
      }
    }

    // Groups before sites: routes refer to them by name.
    if (const toml::node* node = root.get("upstream")) load_upstreams(*node);

    const toml::node* sites = root.get("site");
    if (sites == nullptr) {
      error(root.source(), "no [[site]] is defined",
            "add a [[site]] table, e.g. [[site]] root = \"/var/www/html\"");
    } else if (const auto* array = sites->as_array();
               array != nullptr && (array->empty() || array->is_array_of_tables())) {
      if (array->empty()) {
        error(sites->source(), "no [[site]] is defined", "add a [[site]] table");
      }
      for (const toml::node& element : *array) load_site(*element.as_table());
      finish_sites();
    } else {
      type_error(*sites, "site", "an array of tables",
                 "write each site as a [[site]] table (double brackets)");
    }
  }

  void load_listen(const toml::node& node) {
    if (node.is_string() || node.is_table()) {
      load_listen_entry(node);
    } else if (const auto* array = node.as_array()) {
      if (array->empty()) {
        error(node.source(), "'listen' is empty", "listen on at least one address, e.g. \"*:80\"");
      }
      for (const toml::node& element : *array) load_listen_entry(element);
    } else {
      type_error(node, "listen", "a string, a table or an array of them",
                 "e.g. listen = [\"127.0.0.1:8080\", \"[::1]:8080\"]");
    }
  }

  void load_listen_entry(const toml::node& node) {
    ListenAddress address;
    const toml::node* text_node = &node;
    if (const auto* table = node.as_table()) {
      check_keys(*table, kListenKeys, "a listen table");
      text_node = table->get("address");
      if (const toml::node* backlog = table->get("backlog")) {
        int64_t value = 0;
        if (read_int(*backlog, "listen.backlog", 1, kMaxBacklog, &value)) {
          address.backlog = static_cast<int>(value);
        }
      }
      if (text_node == nullptr) {
        error(node.source(), "listen table has no 'address'",
              "e.g. { address = \"*:80\", backlog = 4096 }");
        return;
      }
      // Who may connect to a unix socket is up to its file's permissions.
      const toml::node* unix_only = nullptr;
      if (const toml::node* mode = table->get("mode")) {
        unix_only = mode;
        std::string text;
        if (read_string(*mode, "listen.mode", &text)) {
          bool octal = !text.empty() && text.size() <= 4 &&
                       text.find_first_not_of("01234567") == std::string::npos;
          if (octal) {
            address.mode = static_cast<int>(std::stoul(text, nullptr, 8));
          } else {
            error(mode->source(), "listen.mode '" + text + "' is not an octal file mode",
                  "e.g. mode = \"0660\" (owner and group may connect)");
          }
        }
      }
      for (const char* key : {"owner", "group"}) {
        if (const toml::node* name = table->get(key)) {
          unix_only = name;
          read_string(*name, "listen."s + key, key[0] == 'o' ? &address.owner : &address.group);
        }
      }
      std::string_view text = text_node->value_or(std::string_view());
      if (unix_only && !text.starts_with("unix:")) {
        error(unix_only->source(), "mode, owner and group apply only to unix: listen addresses",
              "e.g. { address = \"unix:/run/peregrine.sock\", mode = \"0660\" }");
      }
    } else if (!node.is_string()) {
      type_error(node, "listen[]", "a string or a table");
      return;
    }
    std::string text;
    if (!read_string(*text_node, "listen.address", &text)) return;
    std::string message, hint;
    if (!parse_listen_address(text, &address, &message, &hint)) {
      error(text_node->source(), message, hint);
      return;
    }
    address.pos = pos_of(text_node->source());
    // Two ":0" are two different ephemeral ports; two unix sockets at one path are one.
    if (endpoint_port(address.addr) != 0 || address.addr.ss_family == AF_UNIX) {
      for (const ListenAddress& other : config_.listen) {
        if (same_endpoint(other.addr, address.addr)) {
          error(text_node->source(), "duplicate listen address '" + text + "'",
                "'" + other.text + "' at line " + std::to_string(other.pos.line) +
                    " already listens there");
          return;
        }
      }
    }
    config_.listen.push_back(std::move(address));
  }

  void load_limits(const toml::table& table) {
    check_keys(table, kLimitKeys, "[limits]");
    Limits& limits = config_.limits;
    auto duration = [&](std::string_view key, Millis lo, Millis* out) {
      if (const toml::node* node = table.get(key)) {
        read_duration(*node, "limits." + std::string(key), lo, kMaxDuration, out);
      }
    };
    duration("header_timeout", Millis(1), &limits.header_timeout);
    duration("keepalive_timeout", Millis(0), &limits.keepalive_timeout);
    duration("body_timeout", Millis(1), &limits.body_timeout);
    duration("send_timeout", Millis(1), &limits.send_timeout);
    duration("shutdown_timeout", Millis(0), &limits.shutdown_timeout);
    int64_t n = 0;
    if (const toml::node* node = table.get("max_connections")) {
      if (read_int(*node, "limits.max_connections", 1, kMaxConnections, &n)) {
        limits.max_connections = static_cast<uint32_t>(n);
      }
    }
    if (const toml::node* node = table.get("max_requests_per_connection")) {
      if (read_int(*node, "limits.max_requests_per_connection", 1, UINT32_MAX, &n)) {
        limits.max_requests_per_connection = static_cast<uint32_t>(n);
      }
    }
    uint64_t size = 0;
    if (const toml::node* node = table.get("max_header_bytes")) {
      if (read_size(*node, "limits.max_header_bytes", 1 << 10, 1 << 20, &size)) {
        limits.max_header_bytes = static_cast<uint32_t>(size);
      }
    }
    if (const toml::node* node = table.get("max_body_bytes")) {
      if (read_size(*node, "limits.max_body_bytes", 0, uint64_t{1} << 50, &size)) {
        limits.max_body_bytes = size;
      }
    }
  }

  void load_mime_types(const toml::table& table) {
    // Tables iterate in key order; take entries as written so "listed twice" names the later.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, value] : table) entries.emplace_back(&key, &value);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      auto pa = a.first->source().begin, pb = b.first->source().begin;
      return std::tie(pa.line, pa.column) < std::tie(pb.line, pb.column);
    });
    std::map<std::string, SourcePos> seen;
    for (auto [key_ptr, value_ptr] : entries) {
      const toml::key& key = *key_ptr;
      const toml::node& value = *value_ptr;
      std::string extension = to_lower(key.str());
      if (!extension.empty() && extension.front() == '.') extension.erase(0, 1);
      if (extension.empty() || extension.find_first_of("/ \t") != std::string::npos ||
          has_control_chars(extension)) {
        error(
            key.source(), "invalid file extension '" + std::string(key.str()) + "' in [mime_types]",
            "write the extension without a dot, e.g. webmanifest = \"application/manifest+json\"");
        continue;
      }
      std::string type;
      if (!read_string(value, "mime_types." + std::string(key.str()), &type)) continue;
      if (type.find('/') == std::string::npos || type.front() == '/' || type.back() == '/' ||
          has_control_chars(type)) {
        error(value.source(), "invalid media type \"" + type + "\" for '" + extension + "'",
              "a media type looks like \"text/html\" or \"application/json\"");
        continue;
      }
      auto [it, inserted] = seen.emplace(extension, pos_of(key.source()));
      if (!inserted) {
        error(key.source(), "extension '" + extension + "' is listed twice in [mime_types]",
              "first at line " + std::to_string(it->second.line));
        continue;
      }
      config_.mime_types[extension] = type;
    }
  }

  // ---- upstream groups ----

  void load_upstreams(const toml::node& node) {
    const auto* array = node.as_array();
    if (array == nullptr || !(array->empty() || array->is_array_of_tables())) {
      type_error(node, "upstream", "an array of tables",
                 "write each group as an [[upstream]] table (double brackets)");
      return;
    }
    for (const toml::node& element : *array) load_upstream(*element.as_table());
  }

  void load_upstream(const toml::table& table) {
    check_keys(table, kUpstreamKeys, "[[upstream]]");
    UpstreamGroup group;
    group.pos = pos_of(table.source());
    bool named = false;  // a usable, unique name: keep the group even with other errors, so
                         // that the routes naming it do not report it missing as well

    if (const toml::node* node = table.get("name")) {
      if (read_string(*node, "upstream.name", &group.name, false)) {
        if (!is_group_name(group.name)) {
          error(node->source(), "invalid upstream name \"" + group.name + "\"",
                "names use letters, digits, '_', '.' and '-', e.g. \"app\" or \"php-fpm\"");
        } else if (auto [it, inserted] = upstream_names_.emplace(group.name, group.pos);
                   !inserted) {
          error(node->source(), "upstream name '" + group.name + "' is used twice",
                "first at line " + std::to_string(it->second.line));
        } else {
          named = true;
        }
      }
    } else {
      error(table.source(), "[[upstream]] has no 'name'",
            "routes refer to the group by name: name = \"app\"");
    }

    if (const toml::node* node = table.get("balance")) {
      std::string value;
      if (read_string(*node, "upstream.balance", &value)) {
        if (value == "round_robin") {
          group.balance = Balance::kRoundRobin;
        } else if (value == "least_conn") {
          group.balance = Balance::kLeastConn;
        } else if (value == "ip_hash") {
          group.balance = Balance::kIpHash;
        } else if (value == "hash") {
          group.balance = Balance::kHash;
        } else {
          std::string suggestion = closest_match(value, kBalanceNames);
          error(node->source(), "unknown balance \"" + value + "\"",
                suggestion.empty() ? "one of: " + join(kBalanceNames)
                                   : "did you mean '" + suggestion + "'?");
        }
      }
    }
    const toml::node* hash_key = table.get("hash_key");
    if (hash_key != nullptr) {
      std::string value;
      if (group.balance != Balance::kHash) {
        error(hash_key->source(), "'hash_key' needs balance = \"hash\"",
              "remove it, or set balance = \"hash\"");
      } else if (read_string(*hash_key, "upstream.hash_key", &value, false)) {
        std::string problem = normalize_hash_key(&value);
        if (problem.empty()) {
          group.hash_key = value;
        } else {
          error(hash_key->source(), problem,
                "hash_key is \"$uri\", \"$http_NAME\" (a request header) or \"$cookie_NAME\"");
        }
      }
    } else if (group.balance == Balance::kHash) {
      error(table.get("balance")->source(), "balance = \"hash\" needs a 'hash_key'",
            "e.g. hash_key = \"$uri\", \"$http_x_user_id\" or \"$cookie_session\"");
    }

    auto count = [&](std::string_view key, int64_t lo, int64_t hi, uint32_t* out) {
      int64_t n = 0;
      if (const toml::node* node = table.get(key)) {
        if (read_int(*node, "upstream." + std::string(key), lo, hi, &n))
          *out = static_cast<uint32_t>(n);
      }
    };
    auto duration = [&](std::string_view key, Millis lo, Millis* out) {
      if (const toml::node* node = table.get(key)) {
        read_duration(*node, "upstream." + std::string(key), lo, kMaxDuration, out);
      }
    };
    count("max_fails", 0, 1000, &group.max_fails);
    duration("fail_timeout", Millis(1), &group.fail_timeout);
    count("keepalive", 0, 65536, &group.keepalive);
    duration("keepalive_timeout", Millis(1), &group.keepalive_timeout);
    count("keepalive_requests", 1, UINT32_MAX, &group.keepalive_requests);
    count("queue", 0, kMaxQueue, &group.queue);
    duration("queue_timeout", Millis(1), &group.queue_timeout);
    duration("connect_timeout", Millis(1), &group.connect_timeout);
    duration("send_timeout", Millis(1), &group.send_timeout);
    duration("read_timeout", Millis(1), &group.read_timeout);
    count("tries", 1, 100, &group.tries);
    duration("try_timeout", Millis(0), &group.try_timeout);

    size_t errors_before = errors_.size();
    const toml::node* servers = table.get("servers");
    if (servers != nullptr) {
      std::vector<std::pair<std::string, const toml::node*>> addresses;
      if (read_string_list(*servers, "upstream.servers", &addresses)) {
        for (auto& [text, element] : addresses) {
          UpstreamServer server;
          server.pos = pos_of(element->source());
          std::string message, hint;
          if (!parse_upstream_address(text, &server, &message, &hint)) {
            error(element->source(), message, hint);
            continue;
          }
          add_server(element->source(), std::move(server), &group);
        }
      }
    }
    const toml::node* server_tables = table.get("server");
    if (server_tables != nullptr) {
      const auto* array = server_tables->as_array();
      if (array != nullptr && array->is_array_of_tables()) {
        for (const toml::node& element : *array) load_upstream_server(*element.as_table(), &group);
      } else {
        type_error(*server_tables, "upstream.server", "an array of tables",
                   "write each server as an [[upstream.server]] table (double brackets), or list "
                   "addresses in servers = [\"...\"]");
      }
    }
    if (servers == nullptr && server_tables == nullptr) {
      error(table.source(), "[[upstream]] has no servers",
            "add servers = [\"127.0.0.1:8080\"] or [[upstream.server]] tables with an address");
    } else if (errors_.size() == errors_before && group.servers.empty()) {
      error(servers != nullptr ? servers->source() : server_tables->source(),
            "[[upstream]] has no servers", "list at least one address");
    } else if (errors_.size() == errors_before && !group.servers.empty() &&
               std::all_of(group.servers.begin(), group.servers.end(),
                           [](const UpstreamServer& s) { return s.backup; })) {
      error(group.pos, "every server of upstream '" + group.name + "' is a backup",
            "backup servers are used only when no primary server is up; make at least one "
            "server a primary (backup = false)");
    }

    if (const toml::node* node = table.get("health_check")) {
      if (const auto* health = node->as_table()) {
        load_health_check(*health, &group.health_check);
      } else {
        type_error(*node, "upstream.health_check", "a table",
                   "write an [upstream.health_check] section below the [[upstream]]");
      }
    }
    if (named) config_.upstreams.push_back(std::move(group));
  }

  // "$uri", "$http_NAME", "$cookie_NAME". Header names are stored lower-case with '_' turned
  // into '-' (as nginx spells $http_x_user_id); cookie names are case-sensitive and kept.
  static std::string normalize_hash_key(std::string* key) {
    std::string& k = *key;
    if (k == "$uri") return "";
    auto name_ok = [](std::string_view name, bool header) {
      if (name.empty()) return false;
      return header ? detail::is_token(name) : std::all_of(name.begin(), name.end(), [](char c) {
        return static_cast<unsigned char>(c) > 0x20 && c != 0x7f && c != ';' && c != '=' &&
               c != ',' && c != '"';
      });
    };
    if (k.starts_with("$http_")) {
      std::string name = to_lower(std::string_view(k).substr(6));
      if (!name_ok(name, true)) return "invalid header name in hash_key \"" + k + "\"";
      std::replace(name.begin(), name.end(), '_', '-');
      k = "$http_" + name;
      return "";
    }
    if (k.starts_with("$cookie_")) {
      if (!name_ok(std::string_view(k).substr(8), false)) {
        return "invalid cookie name in hash_key \"" + k + "\"";
      }
      return "";
    }
    return "unknown hash_key \"" + k + "\"";
  }

  void add_server(const toml::source_region& where, UpstreamServer server, UpstreamGroup* group) {
    for (const UpstreamServer& other : group->servers) {
      if (other.addr_len == server.addr_len &&
          std::memcmp(&other.addr, &server.addr, server.addr_len) == 0) {
        error(where,
              "server '" + server.address + "' is listed twice in upstream '" + group->name + "'",
              "first at line " + std::to_string(other.pos.line) +
                  "; to send it more requests, give it a weight");
        return;
      }
    }
    group->servers.push_back(std::move(server));
  }

  void load_upstream_server(const toml::table& table, UpstreamGroup* group) {
    check_keys(table, kUpstreamServerKeys, "[[upstream.server]]");
    UpstreamServer server;
    server.pos = pos_of(table.source());
    bool ok = true;
    int64_t n = 0;
    if (const toml::node* node = table.get("weight")) {
      if (read_int(*node, "upstream.server.weight", 1, 1000, &n)) {
        server.weight = static_cast<uint32_t>(n);
      } else {
        ok = false;
      }
    }
    if (const toml::node* node = table.get("backup")) {
      ok = read_bool(*node, "upstream.server.backup", &server.backup) && ok;
    }
    if (const toml::node* node = table.get("max_conns")) {
      if (read_int(*node, "upstream.server.max_conns", 0, kMaxConnsPerServer, &n)) {
        server.max_conns = static_cast<uint32_t>(n);
      } else {
        ok = false;
      }
    }
    const toml::node* address = table.get("address");
    if (address == nullptr) {
      error(table.source(), "[[upstream.server]] has no 'address'",
            "e.g. address = \"127.0.0.1:8080\" or \"unix:/run/app.sock\"");
      return;
    }
    std::string text, message, hint;
    if (!read_string(*address, "upstream.server.address", &text)) return;
    if (!parse_upstream_address(text, &server, &message, &hint)) {
      error(address->source(), message, hint);
      return;
    }
    server.pos = pos_of(address->source());
    if (ok) add_server(address->source(), std::move(server), group);
  }

  void load_health_check(const toml::table& table, HealthCheck* check) {
    check_keys(table, kHealthCheckKeys, "[upstream.health_check]");
    check->enabled = true;
    if (const toml::node* node = table.get("path")) {
      std::string path;
      if (read_string(*node, "upstream.health_check.path", &path, false)) {
        if (path.front() != '/' || has_control_chars(path) || path.find(' ') != std::string::npos) {
          error(node->source(), "invalid health check path \"" + path + "\"",
                "a request target starting with '/', e.g. \"/health\"");
        } else {
          check->path = path;
        }
      }
    }
    if (const toml::node* node = table.get("host")) {
      std::string host;
      if (read_string(*node, "upstream.health_check.host", &host, false)) {
        if (!valid_host_header(host)) {
          error(node->source(), "invalid health check host \"" + host + "\"",
                "a Host header value such as \"app.internal\" or \"app.internal:8080\"");
        } else {
          check->host = host;
        }
      }
    }
    if (const toml::node* node = table.get("interval")) {
      read_duration(*node, "upstream.health_check.interval", Millis(100), kMaxDuration,
                    &check->interval);
    }
    if (const toml::node* node = table.get("timeout")) {
      read_duration(*node, "upstream.health_check.timeout", Millis(1), kMaxDuration,
                    &check->timeout);
    }
    if (const toml::node* node = table.get("status")) {
      int64_t lo = 0, hi = 0;
      constexpr std::string_view kName = "upstream.health_check.status";
      if (node->is_integer()) {
        if (read_int(*node, kName, 100, 599, &lo)) {
          check->expect_status_min = check->expect_status_max = static_cast<int>(lo);
        }
      } else if (const auto* range = node->as_array(); range != nullptr && range->size() == 2) {
        if (read_int(*range->get(0), kName, 100, 599, &lo) &&
            read_int(*range->get(1), kName, 100, 599, &hi)) {
          if (lo > hi) {
            error(node->source(),
                  "health check status range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "] is empty",
                  "write the lower status first, e.g. [200, 399]");
          } else {
            check->expect_status_min = static_cast<int>(lo);
            check->expect_status_max = static_cast<int>(hi);
          }
        }
      } else {
        type_error(*node, kName, "a status or a [lowest, highest] range",
                   "e.g. status = 200 or status = [200, 399]");
      }
    }
    int64_t n = 0;
    if (const toml::node* node = table.get("rise")) {
      if (read_int(*node, "upstream.health_check.rise", 1, 1000, &n))
        check->rise = static_cast<uint32_t>(n);
    }
    if (const toml::node* node = table.get("fall")) {
      if (read_int(*node, "upstream.health_check.fall", 1, 1000, &n))
        check->fall = static_cast<uint32_t>(n);
    }
  }

  // A Host header value: a name or IP literal with an optional port; no spaces or controls.
  static bool valid_host_header(std::string_view host) {
    if (host.empty() || host.size() > 255) return false;
    return std::all_of(host.begin(), host.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '.' || c == '_' || c == ':' || c == '[' || c == ']';
    });
  }

  const UpstreamGroup* find_group(std::string_view name) const {
    for (const UpstreamGroup& group : config_.upstreams) {
      if (group.name == name) return &group;
    }
    return nullptr;
  }

  // ---- fastcgi and proxy routes ----

  // Options of one handler written on a route of another.
  void reject_foreign_keys(const toml::table& table, const std::vector<std::string_view>& keys,
                           HandlerKind owner, HandlerKind actual, std::string_view hint) {
    if (actual == owner) return;
    const std::string owner_key = owner == HandlerKind::kFastcgi ? "fastcgi" : "proxy";
    for (std::string_view key : keys) {
      if (key == owner_key) continue;  // the selector itself: a conflict reported elsewhere
      if (const toml::node* node = table.get(key)) {
        std::string message = "'";
        message.append(key).append("' needs a '").append(owner_key).append("' route");
        error(node->source(), std::move(message), std::string(hint));
      }
    }
  }

  // The group a fastcgi or proxy route uses: a declared group by `name`, or the implicit group of
  // `address`. Returns "" after reporting a problem.
  std::string resolve_group(const toml::node& node, HandlerKind kind, const std::string& name,
                            const std::string& address) {
    std::string group_name;
    if (!name.empty() && find_group(name) != nullptr) {
      group_name = name;
    } else if (!address.empty()) {
      UpstreamServer server;
      std::string message, hint;
      if (!parse_upstream_address(address, &server, &message, &hint)) {
        error(node.source(), message, hint);
        return "";
      }
      group_name = add_implicit_group(&config_, server, pos_of(node.source()));
    } else {
      std::vector<std::string_view> names;
      for (const UpstreamGroup& group : config_.upstreams) {
        if (group.name.find(':') == std::string::npos) names.push_back(group.name);
      }
      std::string suggestion = closest_match(name, names);
      std::string declared = declared_group_names(config_);
      std::string hint = suggestion.empty() ? "" : "did you mean '" + suggestion + "'? ";
      hint +=
          declared.empty() ? "no [[upstream]] group is declared" : "declared groups: " + declared;
      hint +=
          kind == HandlerKind::kFastcgi
              ? "; or write an address: \"unix:/run/php/php8.2-fpm.sock\", \"127.0.0.1:9000\""
              : "; or write an address: \"http://127.0.0.1:8080\", \"http://unix:/run/app.sock:\"";
      error(node.source(), "no upstream group named '" + name + "'", hint);
      return "";
    }

    const UpstreamGroup* group = find_group(group_name);
    if (kind == HandlerKind::kFastcgi && group != nullptr && group->health_check.enabled) {
      error(node.source(),
            "upstream '" + group_name +
                "' has a health_check, which probes over HTTP; a fastcgi "
                "route cannot use it",
            "remove [upstream.health_check] from the group at line " +
                std::to_string(group->pos.line) + " (passive health still applies)");
    }
    auto [it, inserted] = group_uses_.emplace(group_name, GroupUse{kind, pos_of(node.source())});
    if (!inserted && it->second.kind != kind) {
      error(node.source(), "upstream '" + group_name + "' is used by both fastcgi and proxy routes",
            "first used by a " +
                std::string(it->second.kind == HandlerKind::kFastcgi ? "fastcgi" : "proxy") +
                " route at line " + std::to_string(it->second.pos.line) +
                "; a group speaks one protocol, so declare one group for each");
    }
    return group_name;
  }

  void load_fastcgi(const toml::table& table, const toml::node& target, Route* route) {
    FastcgiOptions& options = route->fastcgi;
    std::string text;
    if (read_string(target, "site.route.fastcgi", &text, false)) {
      options.upstream = resolve_group(target, HandlerKind::kFastcgi,
                                       text.find(':') == std::string::npos ? text : "",
                                       text.find(':') != std::string::npos ? text : "");
    }
    options.root = route->static_files.root;
    if (options.root.empty() && table.get("root") == nullptr) {
      error(table.source(), "fastcgi route has no root",
            "set root on the route or on its [[site]]: SCRIPT_FILENAME is the root followed by "
            "the script's path");
    }
    // The site's index is for static files; a FastCGI route's default is its own.
    if (table.get("index") == nullptr) route->static_files.index = {"index.php"};
    options.index = route->static_files.index;

    options.split_path = default_split_path();
    if (const toml::node* node = table.get("split_path")) {
      std::string pattern;
      if (read_string(*node, "site.route.split_path", &pattern, false)) {
        std::string message;
        size_t offset = 0;
        auto regex = Regex::compile(pattern, &message, &offset);
        int groups = regex != nullptr ? detail::regex_capture_count(pattern) : -1;
        if (regex == nullptr) {
          error(node->source(),
                "invalid regex \"" + pattern + "\": " + message + " at offset " +
                    std::to_string(offset),
                "PCRE2 syntax, e.g. split_path = '" + std::string(kDefaultSplitPath) + "'");
        } else if (groups != 2) {
          error(node->source(),
                "'split_path' must have 2 capture groups (SCRIPT_NAME, PATH_INFO), not " +
                    std::to_string(groups),
                "e.g. '" + std::string(kDefaultSplitPath) + "'; write other groups as (?:...)");
        } else {
          options.split_path = std::move(regex);
        }
      }
    }
    if (const toml::node* node = table.get("try_files")) load_try_files(*node, &options);
    if (const toml::node* node = table.get("fastcgi_params")) {
      if (const auto* params = node->as_table()) {
        load_fastcgi_params(*params, &options);
      } else {
        type_error(*node, "site.route.fastcgi_params", "a table",
                   "e.g. fastcgi_params = { APP_ENV = \"production\" }");
      }
    }
    if (const toml::node* node = table.get("fastcgi_buffer")) {
      read_size(*node, "site.route.fastcgi_buffer", 0, kMaxResponseBuffer, &options.buffer_bytes);
    }
    if (const toml::node* node = table.get("check_script")) {
      read_bool(*node, "site.route.check_script", &options.check_script);
    }
    if (const toml::node* node = table.get("fastcgi_pipelining")) {
      read_bool(*node, "site.route.fastcgi_pipelining", &options.pipelining);
    }
  }

  void load_try_files(const toml::node& node, FastcgiOptions* options) {
    std::vector<std::pair<std::string, const toml::node*>> entries;
    if (!read_string_list(node, "site.route.try_files", &entries)) return;
    if (entries.size() < 2) {
      error(node.source(), "'try_files' needs at least two entries",
            "files to try, then the fallback: [\"$uri\", \"$uri/\", \"/index.php?$args\"] or "
            "[\"$uri\", \"=404\"]");
      return;
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& [entry, element] = entries[i];
      const bool last = i + 1 == entries.size();
      if (entry.starts_with('=')) {
        std::string_view code = std::string_view(entry).substr(1);
        if (!last) {
          error(element->source(), "\"" + entry + "\" can only be the last entry of 'try_files'",
                "a status ends the list: nothing after it would be tried");
        } else if (!all_digits(code) || code.size() != 3 || code < "400" || code > "599") {
          error(element->source(), "invalid try_files status \"" + entry + "\"",
                "write a status 400..599, e.g. \"=404\"");
        } else {
          out.push_back(entry);
        }
        continue;
      }
      if (entry.empty() || has_control_chars(entry) || entry.find(' ') != std::string::npos) {
        error(element->source(), "invalid try_files entry \"" + entry + "\"",
              "entries are paths such as \"$uri\", \"$uri/\" or \"/index.php?$args\"");
        continue;
      }
      if (entry.front() != '/' && !entry.starts_with("$uri")) {
        error(element->source(), "try_files entry \"" + entry + "\" must start with '/' or $uri",
              "e.g. \"$uri\", \"$uri/\", \"/index.php?$args\"");
        continue;
      }
      if (!last && entry.find('?') != std::string::npos) {
        error(element->source(), "only the last try_files entry may have a query",
              "files are tried by path; the fallback URI may carry \"?$args\"");
        continue;
      }
      bool ok = true;
      for (size_t at = entry.find('$'); at != std::string::npos; at = entry.find('$', at + 1)) {
        std::string_view rest = std::string_view(entry).substr(at + 1);
        if (!rest.starts_with("uri") && !rest.starts_with("args")) {
          error(element->source(), "unknown variable in try_files entry \"" + entry + "\"",
                "try_files may use $uri (the request path) and $args (the query string)");
          ok = false;
          break;
        }
      }
      if (ok) out.push_back(entry);
    }
    options->try_files = std::move(out);
  }

  // Written order is kept (toml++ tables iterate by key): params are set in that order.
  template <typename Table>
  static std::vector<std::pair<const toml::key*, const toml::node*>> in_written_order(
      const Table& table) {
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, value] : table) entries.emplace_back(&key, &value);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      auto pa = a.first->source().begin, pb = b.first->source().begin;
      return std::tie(pa.line, pa.column) < std::tie(pb.line, pb.column);
    });
    return entries;
  }

  void load_fastcgi_params(const toml::table& table, FastcgiOptions* options) {
    for (auto [key, value] : in_written_order(table)) {
      std::string name(key->str());
      bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_';
      });
      if (!valid) {
        error(key->source(), "invalid FastCGI parameter name '" + name + "'",
              "parameter names use letters, digits and '_', e.g. APP_ENV");
        continue;
      }
      std::string text;
      if (!read_string(*value, "site.route.fastcgi_params." + name, &text)) continue;
      if (has_control_chars(text)) {
        error(value->source(), "FastCGI parameter '" + name + "' contains control characters");
        continue;
      }
      options->params.emplace_back(name, text);
    }
  }

  void load_proxy(const toml::table& table, const toml::node& target, Route* route) {
    ProxyOptions& options = route->proxy;
    const bool prefix_route = route->match == MatchKind::kPrefix;
    // An exact route's whole path is its "prefix": a path in the URL replaces it, which is how
    // nginx's internal `rewrite ^/$ /index.html` is written here (exact = "/").
    const bool replaceable = prefix_route || route->match == MatchKind::kExact;
    if (replaceable) options.path_prefix = route->pattern;
    std::string text;
    ProxyUrl url;
    if (read_string(target, "site.route.proxy", &text, false)) {
      std::string message, hint;
      if (!parse_proxy_url(text, &url, &message, &hint)) {
        error(target.source(), message, hint);
      } else {
        std::string address = url.address;
        if (!url.name.empty() && find_group(url.name) == nullptr) {
          address = url.default_port_address;  // "http://127.0.0.1" is port 80
        }
        options.upstream = resolve_group(target, HandlerKind::kProxy, url.name, address);
        if (!url.path.empty()) {
          if (replaceable) {
            options.path = url.path;
          } else {
            error(target.source(), "a path in 'proxy' needs a prefix or exact route",
                  "the path replaces the matched prefix (or exact path); use prefix = \"/dir/\", "
                  "or drop the path to pass the request path unchanged");
          }
        }
      }
    }
    if (const toml::node* node = table.get("strip_prefix")) {
      if (read_bool(*node, "site.route.strip_prefix", &options.strip_prefix) &&
          options.strip_prefix) {
        if (!prefix_route) {
          error(node->source(), "'strip_prefix' needs a prefix route",
                "it removes the matched prefix, e.g. with prefix = \"/api/\"");
        } else if (!url.path.empty()) {
          error(node->source(), "'strip_prefix' cannot be combined with a path in 'proxy'",
                "the path in the URL already replaces the prefix; remove one of them");
        }
      }
    }
    if (const toml::node* node = table.get("proxy_host")) {
      std::string host;
      if (read_string(*node, "site.route.proxy_host", &host, false)) {
        if (host == "pass" || host == "upstream" || valid_host_header(host)) {
          options.host_mode = host;
        } else {
          error(node->source(), "invalid proxy_host \"" + host + "\"",
                "\"pass\" (the client's Host), \"upstream\" (the server's address) or a fixed "
                "host name such as \"app.internal\"");
        }
      }
    }
    if (const toml::node* node = table.get("x_forwarded")) {
      bool on = true;
      if (read_bool(*node, "site.route.x_forwarded", &on)) {
        options.x_forwarded_for = options.x_forwarded_proto = options.x_forwarded_host =
            options.x_real_ip = on;
      }
    }
    auto flag = [&](std::string_view key, bool* out) {
      if (const toml::node* node = table.get(key)) {
        read_bool(*node, "site.route." + std::string(key), out);
      }
    };
    flag("forwarded", &options.forwarded);
    flag("rewrite_location", &options.rewrite_location);
    flag("intercept_errors", &options.intercept_errors);
    flag("websocket", &options.websocket);
    if (const toml::node* node = table.get("request_headers")) {
      load_header_rules(*node, "site.route.request_headers", true, &options.request_remove,
                        &options.request_set, &options.request_add);
    }
    if (const toml::node* node = table.get("response_headers")) {
      load_header_rules(*node, "site.route.response_headers", false, &options.response_remove,
                        &options.response_set, &options.response_add);
    }
    if (const toml::node* node = table.get("proxy_buffer")) {
      read_size(*node, "site.route.proxy_buffer", 0, kMaxResponseBuffer, &options.buffer_bytes);
    }
    if (const toml::node* node = table.get("proxy_temp_file_max")) {
      read_size(*node, "site.route.proxy_temp_file_max", 0, uint64_t{1} << 50,
                &options.max_temp_file_bytes);
    }
    if (const toml::node* node = table.get("tunnel_timeout")) {
      read_duration(*node, "site.route.tunnel_timeout", Millis(1), kMaxDuration,
                    &options.tunnel_idle_timeout);
    }
  }

  bool check_header_name(const toml::source_region& where, std::string_view name, bool request,
                         std::string_view list) {
    std::string lower = to_lower(name);
    if (!detail::is_token(name)) {
      error(where, "invalid header name '" + std::string(name) + "' in " + std::string(list),
            "header names are tokens such as X-Request-Id");
      return false;
    }
    if (http::is_managed(name)) {
      error(where, "header '" + std::string(name) + "' is managed by the proxy",
            "framing and connection headers (Connection, Keep-Alive, Transfer-Encoding, "
            "Content-Length, TE, Trailer, Upgrade) cannot be changed per route");
      return false;
    }
    if (request && lower == "host") {
      error(where, "the Host header is set with 'proxy_host', not in " + std::string(list),
            "proxy_host = \"pass\", \"upstream\" or a fixed name");
      return false;
    }
    return true;
  }

  void load_header_rules(const toml::node& node, const std::string& name, bool request,
                         std::vector<std::string>* remove,
                         std::vector<std::pair<std::string, std::string>>* set,
                         std::vector<std::pair<std::string, std::string>>* add) {
    const auto* table = node.as_table();
    if (table == nullptr) {
      type_error(
          node, name, "a table",
          "e.g. { set = { \"X-A\" = \"1\" }, add = { \"X-B\" = \"2\" }, remove = [\"X-C\"] }");
      return;
    }
    check_keys(*table, kHeaderRuleKeys, "'" + name + "'");
    auto pairs = [&](std::string_view key, std::vector<std::pair<std::string, std::string>>* out) {
      const toml::node* list = table->get(key);
      if (list == nullptr) return;
      const std::string list_name = name + "." + std::string(key);
      const auto* headers = list->as_table();
      if (headers == nullptr) {
        type_error(*list, list_name, "a table of header names and values",
                   "e.g. " + std::string(key) + " = { \"X-Env\" = \"production\" }");
        return;
      }
      std::map<std::string, SourcePos> seen;
      for (auto [key_ptr, value] : in_written_order(*headers)) {
        std::string header(key_ptr->str());
        if (!check_header_name(key_ptr->source(), header, request, "'" + list_name + "'")) continue;
        if (auto [it, inserted] = seen.emplace(to_lower(header), pos_of(key_ptr->source()));
            !inserted) {
          error(
              key_ptr->source(), "header '" + header + "' is listed twice in '" + list_name + "'",
              "first at line " + std::to_string(it->second.line) + " (names are case-insensitive)");
          continue;
        }
        std::string text;
        if (!read_string(*value, list_name + "." + header, &text)) continue;
        bool bad = std::any_of(text.begin(), text.end(), [](char c) {
          return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
        });
        if (bad) {
          error(value->source(),
                "the value of header '" + header + "' contains control characters");
          continue;
        }
        out->emplace_back(header, text);
      }
    };
    pairs("set", set);
    pairs("add", add);
    if (const toml::node* list = table->get("remove")) {
      std::vector<std::pair<std::string, const toml::node*>> names;
      if (read_string_list(*list, name + ".remove", &names)) {
        for (auto& [header, element] : names) {
          if (check_header_name(element->source(), header, request, "'" + name + ".remove'")) {
            remove->push_back(header);
          }
        }
      }
    }
  }

  // ---- sites ----

  struct SiteExtra {
    SourcePos default_pos;  // of `default = true`, when present
  };

  void load_static_option(const toml::table& table, std::string_view key, std::string_view prefix,
                          StaticOptions* options) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return;
    std::string name = std::string(prefix) + std::string(key);
    if (key == "root") {
      std::string value, problem;
      if (!read_string(*node, name, &value, false)) return;
      if (detail::resolve_directory(value, base_dir_, &options->root, &problem)) {
        options->alias = false;
      } else {
        error(node->source(), "root \"" + value + "\" " + problem, relative_hint(value));
      }
    } else if (key == "index") {
      std::vector<std::pair<std::string, const toml::node*>> names;
      if (!read_string_list(*node, name, &names)) return;
      std::vector<std::string> index;
      for (auto& [file, element] : names) {
        if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
          error(element->source(), "invalid index file name \"" + file + "\"",
                "index entries are file names such as \"index.html\", without a '/'");
          continue;
        }
        index.push_back(file);
      }
      options->index = std::move(index);
    } else if (key == "directory_listing") {
      read_bool(*node, name, &options->directory_listing);
    } else if (key == "dotfiles") {
      read_bool(*node, name, &options->dotfiles);
    } else if (key == "symlinks_outside_root") {
      read_bool(*node, name, &options->symlinks_outside_root);
    } else if (key == "precompressed") {
      read_bool(*node, name, &options->precompressed);
    } else if (key == "etag") {
      read_bool(*node, name, &options->etag);
    } else if (key == "cache_valid") {
      read_duration(*node, name, Millis(0), kMaxDuration, &options->cache_valid);
    }
  }

  std::string relative_hint(std::string_view path) const {
    if (!path.empty() && path.front() != '/') {
      return "relative paths are resolved against the config file's directory, " + base_dir_;
    }
    return "";
  }

  void load_site(const toml::table& table) {
    check_keys(table, kSiteKeys, "[[site]]");
    Site site;
    site.pos = pos_of(table.source());
    site.access_log.path = "stdout";  // combined format to stdout unless told otherwise
    SiteExtra extra;

    if (const toml::node* node = table.get("hosts")) {
      std::vector<std::pair<std::string, const toml::node*>> hosts;
      read_string_list(*node, "site.hosts", &hosts);
      for (auto& [host, element] : hosts) {
        std::string hint;
        std::string problem = check_host(&host, &hint);
        if (!problem.empty()) {
          error(element->source(), problem, hint);
          continue;
        }
        SourcePos here = pos_of(element->source());
        auto [it, inserted] = hosts_.emplace(host, here);
        if (!inserted) {
          bool same_site =
              std::find(site.hosts.begin(), site.hosts.end(), host) != site.hosts.end();
          error(element->source(),
                same_site ? "host '" + host + "' is listed twice"
                          : "host '" + host + "' is already used by another site",
                "first at line " + std::to_string(it->second.line));
          continue;
        }
        site.hosts.push_back(host);
      }
    }
    if (const toml::node* node = table.get("default")) {
      if (read_bool(*node, "site.default", &site.is_default) && site.is_default) {
        extra.default_pos = pos_of(node->source());
      }
    }
    for (std::string_view key : kStaticKeys)
      load_static_option(table, key, "site.", &site.static_files);

    if (const toml::node* node = table.get("access_log")) {
      std::string value;
      if (read_string(*node, "site.access_log", &value, false)) {
        detail::apply_access_log(value, base_dir_, &site.access_log);
      }
    }
    if (const toml::node* node = table.get("access_log_format")) {
      std::string value;
      if (read_string(*node, "site.access_log_format", &value)) {
        if (value == "combined" || value == "json") {
          if (site.access_log.format != AccessLogFormat::kOff) {
            site.access_log.format =
                value == "json" ? AccessLogFormat::kJson : AccessLogFormat::kCombined;
          }
        } else {
          std::string suggestion = closest_match(value, {"combined", "json"});
          error(
              node->source(), "unknown access log format \"" + value + "\"",
              suggestion.empty() ? "one of: combined, json" : "did you mean '" + suggestion + "'?");
        }
      }
    }
    if (const toml::node* node = table.get("error_pages")) {
      if (const auto* pages = node->as_table()) {
        load_error_pages(*pages, &site);
        if (!pages->empty() && table.get("root") == nullptr) {
          error(node->source(), "'error_pages' needs the site's 'root'",
                "error pages are files under the site root; add root = \"...\"");
        }
      } else {
        type_error(*node, "site.error_pages", "a table",
                   "e.g. error_pages = { 404 = \"/errors/404.html\" }");
      }
    }

    if (const toml::node* node = table.get("route")) {
      const auto* routes = node->as_array();
      if (routes != nullptr && (routes->empty() || routes->is_array_of_tables())) {
        for (const toml::node& element : *routes) {
          Route route;
          if (load_route(*element.as_table(), site, &route))
            site.routes.push_back(std::move(route));
        }
      } else {
        type_error(*node, "site.route", "an array of tables",
                   "write each route as a [[site.route]] table (double brackets)");
      }
    }
    const toml::node* routes_node = table.get("route");
    const bool no_routes =
        routes_node == nullptr || (routes_node->is_array() && routes_node->as_array()->empty());
    // With a root, paths no declared route matches are served from it (as nginx serves
    // unmatched locations from the server's root): one implicit static route, last.
    const bool has_catch_all = std::any_of(
        site.routes.begin(), site.routes.end(),
        [](const Route& r) { return r.match == MatchKind::kPrefix && r.pattern == "/"; });
    if (no_routes || (!site.static_files.root.empty() && !has_catch_all)) {
      Route route;
      route.match = MatchKind::kPrefix;
      route.pattern = "/";
      route.static_files = site.static_files;
      route.pos = site.pos;
      if (route.static_files.root.empty() && table.get("root") == nullptr) {
        error(site.pos, "site has neither a 'root' nor any [[site.route]]",
              "add root = \"/var/www/html\" to serve files, or routes");
      }
      site.routes.push_back(std::move(route));
    }
    sites_extra_.push_back(extra);
    config_.sites.push_back(std::move(site));
  }

  void load_error_pages(const toml::table& pages, Site* site) {
    for (auto&& [key, value] : pages) {
      std::string_view code_text = key.str();
      int code = 0;
      if (all_digits(code_text) && code_text.size() == 3) code = std::stoi(std::string(code_text));
      if (code < 400 || code > 599) {
        error(key.source(),
              "error page key '" + std::string(code_text) + "' is not a status 400..599",
              "keys are status codes, e.g. 404 = \"/errors/404.html\"");
        continue;
      }
      std::string path;
      if (!read_string(value, "site.error_pages." + std::string(code_text), &path)) continue;
      if (path.empty() || path.front() != '/' || has_control_chars(path) ||
          path.find("/../") != std::string::npos || path.ends_with("/..")) {
        error(value.source(), "error page \"" + path + "\" must be a path under the site root",
              "start it with '/', e.g. \"/errors/" + std::string(code_text) + ".html\"");
        continue;
      }
      site->error_pages[code] = path;
    }
  }

  // Returns false when the route is unusable (an error was reported).
  bool load_route(const toml::table& table, const Site& site, Route* route) {
    check_keys(table, kRouteKeys, "[[site.route]]");
    route->pos = pos_of(table.source());
    size_t errors_before = errors_.size();

    // Exactly one match key. Keys iterate alphabetically; order them as written.
    std::vector<std::pair<std::string_view, const toml::node*>> matches;
    for (std::string_view key : kMatchKeys) {
      if (const toml::node* node = table.get(key)) matches.emplace_back(key, node);
    }
    auto key_pos = [&](std::string_view key) { return table.find(key)->first.source(); };
    std::sort(matches.begin(), matches.end(), [&](const auto& a, const auto& b) {
      auto pa = key_pos(a.first).begin, pb = key_pos(b.first).begin;
      return std::tie(pa.line, pa.column) < std::tie(pb.line, pb.column);
    });
    if (matches.empty()) {
      error(table.source(), "route has no match key",
            "give it exactly one of: exact = \"/path\", prefix = \"/dir/\", extension = \"php\", "
            "regex = \"^/...$\"");
    }
    for (size_t i = 1; i < matches.size(); ++i) {
      error(key_pos(matches[i].first),
            "route has more than one match key ('" + std::string(matches[0].first) + "' and '" +
                std::string(matches[i].first) + "')",
            "use exactly one of exact, prefix, extension, regex; add another [[site.route]] for "
            "the other");
    }
    if (!matches.empty()) load_match(matches[0].first, *matches[0].second, route);

    // The handler.
    const toml::node* return_node = table.get("return");
    const toml::node* handler_node = table.get("handler");
    if (handler_node != nullptr) {
      std::string name;
      if (read_string(*handler_node, "site.route.handler", &name, false)) {
        if (name == "static") {
          route->handler = HandlerKind::kStatic;
        } else if (name == "return") {
          route->handler = HandlerKind::kReturn;
          if (return_node == nullptr) {
            error(table.source(), "handler \"return\" needs 'return = STATUS'",
                  "e.g. return = 200 and body = \"...\"");
          }
        } else if (name == "fastcgi" || name == "proxy") {
          error(handler_node->source(), "handler \"" + name + "\" is chosen with '" + name + "'",
                "write " + name + " = \"" +
                    (name == "fastcgi"
                         ? "GROUP or ADDRESS\", e.g. fastcgi = \"unix:/run/php/php8.2-fpm.sock\""
                         : "URL\", e.g. proxy = \"http://127.0.0.1:8080\"") +
                    ", and remove 'handler'");
        } else if (!detail::is_token(name)) {
          error(handler_node->source(), "invalid handler name \"" + name + "\"",
                "\"static\", or the name an embedding program registered its handler under");
        } else {
          route->handler = HandlerKind::kApplication;
          route->handler_name = name;
        }
        if (return_node != nullptr && name != "return") {
          error(handler_node->source(), "'handler' cannot be combined with 'return'",
                "'return' already selects the return handler; remove 'handler'");
        }
      }
    }
    if (return_node != nullptr) {
      route->handler = HandlerKind::kReturn;
      load_return(table, *return_node, route);
    } else {
      for (std::string_view key : {"location", "body", "content_type"}) {
        if (const toml::node* node = table.get(key)) {
          error(node->source(), "'" + std::string(key) + "' needs a 'return' route",
                "add return = STATUS, e.g. return = 301 with location");
        }
      }
    }

    // FastCGI and proxy routes: the key names the back end, and excludes every other handler.
    const toml::node* fastcgi_node = table.get("fastcgi");
    const toml::node* proxy_node = table.get("proxy");
    const toml::node* gateway_node = fastcgi_node != nullptr ? fastcgi_node : proxy_node;
    const std::string gateway_key = fastcgi_node != nullptr ? "fastcgi" : "proxy";
    if (fastcgi_node != nullptr && proxy_node != nullptr) {
      auto a = fastcgi_node->source().begin, b = proxy_node->source().begin;
      const toml::node* later =
          std::tie(a.line, a.column) < std::tie(b.line, b.column) ? proxy_node : fastcgi_node;
      error(later->source(), "'fastcgi' and 'proxy' cannot both be set on a route",
            "a route has exactly one handler; add another [[site.route]] for the other");
    } else if (gateway_node != nullptr && return_node != nullptr) {
      error(gateway_node->source(), "'" + gateway_key + "' cannot be combined with 'return'",
            "a route has exactly one handler; remove one of them");
    } else if (gateway_node != nullptr && handler_node != nullptr) {
      error(handler_node->source(), "'handler' cannot be combined with '" + gateway_key + "'",
            "'" + gateway_key + "' already selects the " + gateway_key +
                " handler; remove 'handler'");
    }
    if (gateway_node != nullptr && return_node == nullptr) {
      route->handler = fastcgi_node != nullptr ? HandlerKind::kFastcgi : HandlerKind::kProxy;
    }
    reject_foreign_keys(table, kFastcgiKeys, HandlerKind::kFastcgi, route->handler,
                        "add fastcgi = \"GROUP or ADDRESS\" to send the route to a FastCGI back "
                        "end such as php-fpm");
    reject_foreign_keys(table, kProxyKeys, HandlerKind::kProxy, route->handler,
                        "add proxy = \"http://...\" to send the route to an HTTP back end");

    // Static options: the site's, overridden by the route's. A FastCGI route uses them for
    // its root, its index and the static files it serves itself.
    route->static_files = site.static_files;
    for (std::string_view key : kStaticKeys) {
      const toml::node* node = table.get(key);
      if (node == nullptr) continue;
      if (route->handler == HandlerKind::kReturn) {
        error(node->source(), "'" + std::string(key) + "' does not apply to a 'return' route",
              "static options go on static (or application) routes");
        continue;
      }
      if (route->handler == HandlerKind::kProxy) {
        error(node->source(), "'" + std::string(key) + "' does not apply to a 'proxy' route",
              "the back end serves the content; static options go on static (or application) "
              "routes");
        continue;
      }
      if (route->handler == HandlerKind::kFastcgi && key == "directory_listing") {
        error(node->source(), "'directory_listing' does not apply to a 'fastcgi' route",
              "a directory is answered by its index script (index = [\"index.php\"]) or by "
              "try_files");
        continue;
      }
      load_static_option(table, key, "site.route.", &route->static_files);
    }
    if (const toml::node* node = table.get("alias")) {
      std::string value, problem;
      if (route->handler == HandlerKind::kReturn) {
        error(node->source(), "'alias' does not apply to a 'return' route");
      } else if (route->handler == HandlerKind::kProxy) {
        error(node->source(), "'alias' does not apply to a 'proxy' route",
              "to replace the prefix on the way to the back end, give proxy a path: "
              "proxy = \"http://app/new/\", or set strip_prefix = true");
      } else if (route->handler == HandlerKind::kFastcgi) {
        error(node->source(), "'alias' does not apply to a 'fastcgi' route",
              "set root: SCRIPT_FILENAME is the root followed by the script's path");
      } else if (!matches.empty() && matches[0].first != "prefix") {
        error(node->source(), "'alias' needs a prefix route",
              "alias replaces the matched prefix; write prefix = \"/dir/\" instead of '" +
                  std::string(matches[0].first) + "'");
      } else if (table.get("root") != nullptr) {
        error(node->source(), "'alias' and 'root' cannot both be set on a route",
              "root maps the whole path under a directory; alias replaces the matched prefix");
      } else if (read_string(*node, "site.route.alias", &value, false)) {
        if (detail::resolve_directory(value, base_dir_, &route->static_files.root, &problem)) {
          route->static_files.alias = true;
        } else {
          error(node->source(), "alias \"" + value + "\" " + problem, relative_hint(value));
        }
      }
    }

    if (const toml::node* node = table.get("methods")) {
      std::vector<std::pair<std::string, const toml::node*>> methods;
      if (read_string_list(*node, "site.route.methods", &methods)) {
        if (methods.empty()) {
          error(node->source(), "'methods' is empty",
                "omit it to allow the handler's default methods");
        }
        for (auto& [method, element] : methods) {
          if (!detail::is_token(method)) {
            error(element->source(), "invalid method \"" + method + "\"",
                  "methods are tokens such as GET, HEAD, POST");
            continue;
          }
          for (char& c : method) {
            if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
          }
          if (std::find(route->methods.begin(), route->methods.end(), method) ==
              route->methods.end()) {
            route->methods.push_back(method);
          }
        }
      }
    }

    if (route->handler == HandlerKind::kFastcgi) load_fastcgi(table, *fastcgi_node, route);
    if (route->handler == HandlerKind::kProxy) load_proxy(table, *proxy_node, route);

    if (route->handler == HandlerKind::kStatic && route->static_files.root.empty() &&
        errors_.size() == errors_before) {
      error(table.source(), "static route has no root",
            "set root on the route or on its [[site]], or give the route a 'return'");
    }
    return errors_.size() == errors_before;
  }

  void load_match(std::string_view kind, const toml::node& node, Route* route) {
    std::string value;
    std::string name = "site.route." + std::string(kind);
    if (!read_string(node, name, &value, false)) return;
    if (kind == "exact" || kind == "prefix") {
      route->match = kind == "exact" ? MatchKind::kExact : MatchKind::kPrefix;
      if (value.front() != '/') {
        error(node.source(), "'" + name + "' must start with '/'", "e.g. \"/" + value + "\"");
      } else if (has_control_chars(value) || value.find(' ') != std::string::npos) {
        error(node.source(), "'" + name + "' contains spaces or control characters");
      } else if (kind == "prefix" && value.find('*') != std::string::npos) {
        error(node.source(), "prefix \"" + value + "\" contains '*'",
              "a prefix matches everything below it without wildcards; for patterns use regex");
      }
      route->pattern = value;
    } else if (kind == "extension") {
      route->match = MatchKind::kExtension;
      std::string extension = to_lower(value);
      if (!extension.empty() && extension.front() == '.') extension.erase(0, 1);
      if (extension.empty() || extension.find_first_of("/*. \t") != std::string::npos ||
          has_control_chars(extension)) {
        error(node.source(), "invalid extension \"" + value + "\"",
              "write the extension alone, e.g. extension = \"php\"");
      }
      route->pattern = extension;
    } else {
      route->match = MatchKind::kRegex;
      route->pattern = value;
      std::string message;
      size_t offset = 0;
      route->regex = Regex::compile(value, &message, &offset);
      if (route->regex == nullptr) {
        error(
            node.source(),
            "invalid regex \"" + value + "\": " + message + " at offset " + std::to_string(offset),
            "PCRE2 syntax, e.g. regex = \"^/user/([0-9]+)$\"");
      }
    }
  }

  void load_return(const toml::table& table, const toml::node& status_node, Route* route) {
    ReturnOptions& options = route->return_options;
    int64_t status = 0;
    if (!read_int(status_node, "site.route.return", 100, 599, &status)) return;
    options.status = static_cast<int>(status);
    const toml::node* location = table.get("location");
    if (is_redirect(options.status)) {
      if (location == nullptr) {
        error(table.source(), "'return = " + std::to_string(status) + "' needs a 'location'",
              "e.g. location = \"/new/path\" or \"https://example.com$uri\"");
      } else if (read_string(*location, "site.route.location", &options.location, false)) {
        check_location(*location, options.location, route->match);
      }
    } else if (location != nullptr) {
      error(location->source(),
            "'location' is only for redirects (301, 302, 303, 307, 308), not " +
                std::to_string(status),
            "remove it, or return a redirect status");
    }
    if (const toml::node* node = table.get("body")) {
      read_string(*node, "site.route.body", &options.body);
      if (status < 200 || status == 204 || status == 304) {
        error(node->source(), "status " + std::to_string(status) + " cannot have a body");
      }
    }
    if (const toml::node* node = table.get("content_type")) {
      if (read_string(*node, "site.route.content_type", &options.content_type, false) &&
          (has_control_chars(options.content_type) ||
           options.content_type.find('/') == std::string::npos)) {
        error(node->source(), "invalid content type \"" + options.content_type + "\"",
              "e.g. \"text/html; charset=utf-8\"");
      }
    }
  }

  // $0..$9 (regex routes only; $0 is the whole match) and $uri are the only substitutions.
  void check_location(const toml::node& node, const std::string& location, MatchKind match) {
    if (has_control_chars(location)) {
      error(node.source(), "'location' contains control characters");
      return;
    }
    for (size_t i = 0; i < location.size(); ++i) {
      if (location[i] != '$') continue;
      std::string_view rest = std::string_view(location).substr(i + 1);
      if (!rest.empty() && rest[0] >= '0' && rest[0] <= '9') {
        if (match != MatchKind::kRegex) {
          error(
              node.source(),
              "'location' uses $" + std::string(1, rest[0]) + " but the route is not a regex route",
              "captures come from regex = \"...\" groups; $uri is the request path");
        }
        continue;
      }
      if (rest.starts_with("uri")) continue;
      error(node.source(), "unknown variable in 'location' (\"" + location + "\")",
            "location may use $1..$9 (regex captures, $0 the whole match) and $uri (the "
            "request path)");
      return;
    }
  }

  // Defaults: at most one site is marked default; a site without hosts matches any host and so
  // is the default itself; otherwise the first site is.
  void finish_sites() {
    std::vector<size_t> marked, hostless;
    for (size_t i = 0; i < config_.sites.size(); ++i) {
      if (config_.sites[i].is_default) marked.push_back(i);
      if (config_.sites[i].hosts.empty()) hostless.push_back(i);
    }
    for (size_t k = 1; k < marked.size(); ++k) {
      error(sites_extra_[marked[k]].default_pos, "more than one site is marked default",
            "the site at line " + std::to_string(config_.sites[marked[0]].pos.line) +
                " is already the default");
    }
    for (size_t k = 1; k < hostless.size(); ++k) {
      error(config_.sites[hostless[k]].pos, "more than one site has no 'hosts'",
            "a site without hosts matches any host, and so does the site at line " +
                std::to_string(config_.sites[hostless[0]].pos.line) + "; give this one hosts");
    }
    if (!hostless.empty() && !marked.empty() && hostless[0] != marked[0]) {
      error(config_.sites[hostless[0]].pos,
            "this site has no 'hosts', so it matches any host, but the site at line " +
                std::to_string(config_.sites[marked[0]].pos.line) + " is marked default",
            "give this site hosts, or mark it default instead");
    }
    size_t chosen = !marked.empty() ? marked[0] : !hostless.empty() ? hostless[0] : 0;
    if (chosen < config_.sites.size()) {
      config_.default_site = chosen;
      for (size_t i = 0; i < config_.sites.size(); ++i) config_.sites[i].is_default = i == chosen;
    }
  }

  std::string file_;
  std::string base_dir_;
  std::vector<ConfigError> errors_;
  Config config_;
  std::map<std::string, SourcePos> hosts_;  // every host of every site -> first declaration
  std::vector<SiteExtra> sites_extra_;      // parallel to config_.sites
  std::map<std::string, SourcePos> upstream_names_;  // declared group names -> first declaration
  struct GroupUse {
    HandlerKind kind;
    SourcePos pos;
  };
  std::map<std::string, GroupUse> group_uses_;  // group -> the first route that uses it
};

}  // namespace

std::string ConfigError::to_string() const {
  std::string out = pos.file.empty() ? "<config>" : pos.file;
  if (pos.line != 0) {
    out += ':' + std::to_string(pos.line) + ':' + std::to_string(pos.column);
  }
  out += ": error: " + message;
  if (!hint.empty()) out += " (hint: " + hint + ")";
  return out;
}

LoadResult load_string(std::string_view toml_text, const std::string& source_name) {
  try {
    Loader loader(source_name, detail::directory_of(source_name));
    return loader.run(toml_text);
  } catch (...) {
    LoadResult result;
    result.errors.push_back({SourcePos{source_name, 0, 0}, "out of memory while loading", ""});
    return result;
  }
}

LoadResult load_file(const std::string& path) {
  LoadResult result;
  auto fail = [&](std::string message) {
    result.errors.push_back({SourcePos{path, 0, 0}, std::move(message), ""});
    return result;
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open config file: "s + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("config file is not a regular file");
  }
  std::string text;
  try {
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (true) {
      if (done == text.size()) text.resize(text.size() + 4096);  // the file may have grown
      ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int saved = errno;
        ::close(fd);
        return fail("cannot read config file: "s + std::strerror(saved));
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    text.resize(done);
  } catch (...) {
    ::close(fd);
    return fail("config file is too large");
  }
  ::close(fd);
  return load_string(text, path);
}

}  // namespace peregrine::config
