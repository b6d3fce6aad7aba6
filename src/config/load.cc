// TOML -> validated Config. Every problem becomes a ConfigError at the file:line:col of the
// offending key or value (of the enclosing table for a missing key); all of them are collected,
// sorted by position, and no Config is built unless there are none. Nothing here throws.
//
// This file reads the document's own keys: the top level, [limits], [mime_types], [[site]] and
// the route-matching keys of [[site.route]]. A route's handler keys are read by the handler's
// reader (src/handlers/NAME/config.cc, found through the HandlerSet the load was given), and
// [[upstream]] groups by src/upstream/config.cc.
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

#include "access/config.h"
#include "admin/config.h"
#include "auth/config.h"
#include "compress/config.h"
#include "config/client_address.h"
#include "config/config.h"
#include "config/header_rules.h"
#include "config/listen_address.h"
#include "config/reader.h"
#include "config/registry.h"
#include "config/sections.h"
#include "config/static_options.h"
#include "config/validate.h"
#include "tls/config.h"
#include "upstream/config.h"

namespace peregrine::config {

namespace {

using detail::closest_match;
using detail::has_control_chars;
using detail::to_lower;
using namespace std::string_literals;

constexpr int kMaxWorkers = 256;
constexpr int64_t kMaxBacklog = 65535;
constexpr int64_t kMaxConnections = 1 << 20;

const std::vector<std::string_view> kTopKeys = {
    "listen",    "workers",   "user",          "group",          "pid_file",
    "error_log", "log_level", "server_header", "limits",         "mime_types",
    "upstream",  "site",      "tls",           "client_address", "request_id",
    "limit",     "admin",     "event_backend", "batch_wait_us"};
const std::vector<std::string_view> kLimitKeys = {
    "header_timeout",   "keepalive_timeout", "body_timeout",
    "send_timeout",     "shutdown_timeout",  "max_connections",
    "max_header_bytes", "max_body_bytes",    "max_requests_per_connection"};
const std::vector<std::string_view> kListenKeys = {"address", "backlog", "mode",  "owner",
                                                   "group",   "tls",     "http2", "proxy_protocol"};
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
                                                 "access_log_escape",
                                                 "error_pages",
                                                 "tls",
                                                 "compress",
                                                 "access",
                                                 "limit",
                                                 "headers",
                                                 "auth",
                                                 "route"};
const std::vector<std::string_view> kMatchKeys = {"exact", "prefix", "extension", "regex"};

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

void read_match(Reader& reader, std::string_view kind, const toml::node& node, Route* route) {
  std::string value;
  std::string name = "site.route." + std::string(kind);
  if (!reader.read_string(node, name, &value, false)) return;
  if (kind == "exact" || kind == "prefix") {
    route->match = kind == "exact" ? MatchKind::kExact : MatchKind::kPrefix;
    if (value.front() != '/') {
      reader.error(node.source(), "'" + name + "' must start with '/'", "e.g. \"/" + value + "\"");
    } else if (has_control_chars(value) || value.find(' ') != std::string::npos) {
      reader.error(node.source(), "'" + name + "' contains spaces or control characters");
    } else if (kind == "prefix" && value.find('*') != std::string::npos) {
      reader.error(
          node.source(), "prefix \"" + value + "\" contains '*'",
          "a prefix matches everything below it without wildcards; for patterns use regex");
    }
    route->pattern = value;
  } else if (kind == "extension") {
    route->match = MatchKind::kExtension;
    std::string extension = to_lower(value);
    if (!extension.empty() && extension.front() == '.') extension.erase(0, 1);
    if (extension.empty() || extension.find_first_of("/*. \t") != std::string::npos ||
        has_control_chars(extension)) {
      reader.error(node.source(), "invalid extension \"" + value + "\"",
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
      reader.error(
          node.source(),
          "invalid regex \"" + value + "\": " + message + " at offset " + std::to_string(offset),
          "PCRE2 syntax, e.g. regex = \"^/user/([0-9]+)$\"");
    }
  }
}

// The handler of a route: the one whose selecting key is set (the first one in the set's order
// when several are, after an error), else the one `handler` names (its `selector` node), else an
// embedding program's handler for an unknown name, else static files. Null after an error that
// leaves no handler.
const HandlerType* select_handler(Reader& reader, const toml::table& table,
                                  const toml::node** selector) {
  const HandlerSet& handlers = reader.handlers();
  std::vector<std::pair<const HandlerType*, const toml::node*>> selected;
  for (const HandlerType* handler : handlers.types()) {
    if (handler->selection != HandlerType::Selection::kKey &&
        handler->selection != HandlerType::Selection::kKeyOrHandler)
      continue;
    if (const toml::node* node = table.get(handler->name)) selected.emplace_back(handler, node);
  }
  const HandlerType* chosen = selected.empty() ? nullptr : selected[0].first;
  if (chosen != nullptr) *selector = selected[0].second;
  if (selected.size() > 1) {
    auto [first, first_node] = selected[0];
    auto [second, second_node] = selected[1];
    const std::string a(first->name), b(second->name);
    if (first->selection == HandlerType::Selection::kKeyOrHandler) {
      // A route that answers by itself (return) beside a gateway: the gateway is the mistake.
      reader.error(second_node->source(), "'" + b + "' cannot be combined with '" + a + "'",
                   "a route has exactly one handler; remove one of them");
    } else {
      const toml::node* later =
          written_before(first_node->source(), second_node->source()) ? second_node : first_node;
      reader.error(later->source(), "'" + a + "' and '" + b + "' cannot both be set on a route",
                   "a route has exactly one handler; add another [[site.route]] for the other");
    }
  }

  const HandlerType* by_handler = handlers.default_type();
  const toml::node* by_handler_selector = nullptr;
  if (const toml::node* handler_node = table.get("handler")) {
    std::string name;
    if (reader.read_string(*handler_node, "site.route.handler", &name, false)) {
      const HandlerType* named = handlers.find(name);
      if (named != nullptr && named->selection == HandlerType::Selection::kKey) {
        reader.error(handler_node->source(),
                     "handler \"" + name + "\" is chosen with '" + name + "'",
                     "write " + name + " = " + std::string(named->value_form) + ", " +
                         std::string(named->example) + ", and remove 'handler'");
      } else if (named != nullptr && named->selection == HandlerType::Selection::kKeyOrHandler) {
        if (table.get(named->name) == nullptr) {
          reader.error(table.source(),
                       "handler \"" + name + "\" needs '" + name + " = " +
                           std::string(named->value_form) + "'",
                       std::string(named->example));
          by_handler = nullptr;
        } else {
          by_handler = named;
        }
      } else if (named != nullptr && named->selection == HandlerType::Selection::kDefault) {
        by_handler = named;
      } else if (!detail::is_token(name)) {
        reader.error(handler_node->source(), "invalid handler name \"" + name + "\"",
                     "\"static\", or the name an embedding program registered its handler under");
      } else if (handlers.named_type() != nullptr) {
        by_handler = handlers.named_type();
        by_handler_selector = handler_node;
      } else {
        reader.error(handler_node->source(), "unknown handler \"" + name + "\"",
                     "\"static\", or a handler this program registers");
        by_handler = nullptr;
      }
      if (chosen != nullptr && name != chosen->name) {
        const std::string key(chosen->name);
        reader.error(handler_node->source(), "'handler' cannot be combined with '" + key + "'",
                     "'" + key + "' already selects the " + key + " handler; remove 'handler'");
      }
    }
  }
  if (chosen == nullptr) {
    chosen = by_handler;
    if (by_handler_selector != nullptr) *selector = by_handler_selector;
  }

  // Keys of the handlers the route does not use.
  for (const HandlerType* handler : handlers.types()) {
    if (handler == chosen || handler->keys == nullptr) continue;
    for (std::string_view key : *handler->keys) {
      if (key == handler->name) continue;  // a selecting key: a conflict reported above
      if (const toml::node* node = table.get(key)) {
        reader.error(
            node->source(),
            "'" + std::string(key) + "' needs a '" + std::string(handler->name) + "' route",
            std::string(handler->foreign_hint));
      }
    }
  }
  return chosen;
}

}  // namespace

// Returns false when the route is unusable (an error was reported).
bool read_route(RouteContext& context, const toml::table& table, Route* route) {
  Reader& reader = context.reader;
  reader.check_keys(table, reader.handlers().route_keys(), "[[site.route]]");
  route->pos = reader.pos_of(table.source());
  size_t errors_before = reader.error_count();

  // Exactly one match key. Keys iterate alphabetically; order them as written.
  std::vector<std::pair<std::string_view, const toml::node*>> matches;
  for (std::string_view key : kMatchKeys) {
    if (const toml::node* node = table.get(key)) matches.emplace_back(key, node);
  }
  auto key_pos = [&](std::string_view key) { return table.find(key)->first.source(); };
  std::sort(matches.begin(), matches.end(), [&](const auto& a, const auto& b) {
    return written_before(key_pos(a.first), key_pos(b.first));
  });
  if (matches.empty()) {
    reader.error(table.source(), "route has no match key",
                 "give it exactly one of: exact = \"/path\", prefix = \"/dir/\", extension = "
                 "\"php\", regex = \"^/...$\"");
  }
  for (size_t i = 1; i < matches.size(); ++i) {
    reader.error(key_pos(matches[i].first),
                 "route has more than one match key ('" + std::string(matches[0].first) +
                     "' and '" + std::string(matches[i].first) + "')",
                 "use exactly one of exact, prefix, extension, regex; add another "
                 "[[site.route]] for the other");
  }
  if (!matches.empty()) read_match(reader, matches[0].first, *matches[0].second, route);

  const toml::node* selector = &table;
  const HandlerType* handler = select_handler(reader, table, &selector);
  route->type = handler;

  // Static options: the site's, overridden by the route's. A FastCGI route uses them for
  // its root, its index and the static files it serves itself.
  read_static_route_options(context, table, handler,
                            matches.empty() ? std::string_view() : matches[0].first, route);
  route->compress = context.site.compress;
  if (const toml::node* node = table.get("compress"))
    compress::read_options(reader, *node, "site.route.compress", &route->compress);
  route->access = context.site.access;
  if (context.limits)
    access::read_options(reader, table, *context.limits, "site.route", &route->access);
  route->auth = context.site.auth;
  if (const toml::node* node = table.get("auth"))
    auth::read_options(reader, *node, "site.route.auth", /*route=*/true, &route->auth);
  route->headers.edits = context.site.headers.edits;
  if (const toml::node* node = table.get("headers")) {
    read_header_rules(reader, *node, "site.route.headers", HeaderRulesFor::kResponse,
                      &route->headers.rules);
    if (!route->headers.rules.empty()) {
      auto edits = context.site.headers.edits
                       ? std::make_shared<http::HeaderEdits>(*context.site.headers.edits)
                       : std::make_shared<http::HeaderEdits>();
      edits->then(route->headers.rules);
      route->headers.edits = std::move(edits);
    }
  }

  if (const toml::node* node = table.get("methods")) {
    std::vector<std::pair<std::string, const toml::node*>> methods;
    if (reader.read_string_list(*node, "site.route.methods", &methods)) {
      if (methods.empty()) {
        reader.error(node->source(), "'methods' is empty",
                     "omit it to allow the handler's default methods");
      }
      for (auto& [method, element] : methods) {
        if (!detail::is_token(method)) {
          reader.error(element->source(), "invalid method \"" + method + "\"",
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

  context.errors_before = errors_before;
  if (handler != nullptr) handler->read(context, table, *selector, route);
  return reader.error_count() == errors_before;
}

namespace {

class Loader {
 public:
  Loader(std::string file, std::string base_dir, const HandlerSet& handlers)
      : reader_(std::move(file), std::move(base_dir)), groups_(&config_) {
    config_.handlers = handlers;
    reader_.set_handlers(&config_.handlers);
  }

  LoadResult run(std::string_view text) {
    LoadResult result;
    try {
      toml::table root;
      try {
        root = toml::parse(text, std::string_view(reader_.file()));
      } catch (const toml::parse_error& e) {
        std::string description(e.description());
        constexpr std::string_view kPrefix = "Error while parsing ";
        if (description.starts_with(kPrefix)) {
          description = "TOML syntax error while parsing " + description.substr(kPrefix.size());
        } else {
          description = "TOML syntax error: " + description;
        }
        reader_.error(e.source(), description);
        result.errors = reader_.take_errors();
        return result;
      }
      config_.source = reader_.file();
      config_.text = std::string(text);
      load_root(root);
    } catch (const std::exception& e) {
      reader_.error(SourcePos{reader_.file(), 0, 0}, "internal error while loading: "s + e.what());
    } catch (...) {
      reader_.error(SourcePos{reader_.file(), 0, 0}, "internal error while loading");
    }
    if (reader_.error_count() != 0) {
      result.errors = reader_.take_errors();
      return result;
    }
    result.warnings = reader_.take_warnings();
    result.config = std::make_shared<Config>(std::move(config_));
    return result;
  }

 private:
  struct SiteExtra {
    SourcePos default_pos;  // of `default = true`, when present
  };

  void load_root(const toml::table& root) {
    reader_.check_keys(root, kTopKeys, "");

    if (const toml::node* node = root.get("listen")) {
      load_listen(*node);
    } else {
      ListenAddress address;
      std::string message, hint;
      parse_listen_address("127.0.0.1:8080", &address, &message, &hint);
      address.pos = reader_.pos_of(root.source());
      config_.listen.push_back(std::move(address));
    }

    if (const toml::node* node = root.get("workers")) {
      constexpr std::string_view kExpected = "an integer 1..256 or \"auto\"";
      if (const auto* s = node->as_string()) {
        if (s->get() == "auto") {
          config_.workers = 0;
        } else {
          reader_.type_error(*node, "workers", kExpected,
                             all_digits(s->get()) ? "write numbers without quotes" : "");
        }
      } else if (const auto* i = node->as_integer(); i != nullptr && i->get() == 0) {
        reader_.error(node->source(), "'workers' is 0; it must be between 1 and 256",
                      "write \"auto\" for one worker per core");
      } else if (node->is_integer()) {
        int64_t n = 0;
        if (reader_.read_int(*node, "workers", 1, kMaxWorkers, &n))
          config_.workers = static_cast<int>(n);
      } else {
        reader_.type_error(*node, "workers", kExpected);
      }
    }

    if (const toml::node* node = root.get("user")) {
      if (reader_.read_string(*node, "user", &config_.user, false) &&
          !detail::user_exists(config_.user)) {
        reader_.error(
            node->source(), "user '" + config_.user + "' does not exist",
            "create it (e.g. useradd --system " + config_.user + ") or name an existing user");
      }
    }
    if (const toml::node* node = root.get("group")) {
      if (reader_.read_string(*node, "group", &config_.group, false) &&
          !detail::group_exists(config_.group)) {
        reader_.error(node->source(), "group '" + config_.group + "' does not exist");
      }
      if (root.get("user") == nullptr) {
        reader_.error(node->source(), "'group' is set without 'user'",
                      "privileges are dropped only to a user; add user = \"...\"");
      }
    }
    if (const toml::node* node = root.get("pid_file")) {
      std::string value;
      if (reader_.read_string(*node, "pid_file", &value)) {
        config_.pid_file = value.empty() ? "" : detail::absolute_path(value, reader_.base_dir());
      }
    }
    if (const toml::node* node = root.get("error_log")) {
      std::string value;
      if (reader_.read_string(*node, "error_log", &value, false)) {
        if (value == "stderr" || value == "stdout") {
          config_.error_log = value;
        } else if (value == "off") {
          reader_.error(node->source(), "'error_log' cannot be \"off\"",
                        "errors always go somewhere: write \"stderr\", \"stdout\" or a file path");
        } else {
          config_.error_log = detail::absolute_path(value, reader_.base_dir());
        }
      }
    }
    if (const toml::node* node = root.get("log_level")) {
      std::string value;
      if (reader_.read_string(*node, "log_level", &value) &&
          !detail::parse_log_level(value, &config_.log_level)) {
        std::string suggestion = closest_match(value, detail::kLogLevels);
        reader_.error(node->source(), "unknown log level \"" + value + "\"",
                      suggestion.empty() ? "one of: debug, info, warn, error"
                                         : "did you mean '" + suggestion + "'?");
      }
    }
    if (const toml::node* node = root.get("event_backend")) {
      std::string value;
      if (reader_.read_string(*node, "event_backend", &value) &&
          !detail::parse_event_backend(value, &config_.event_backend)) {
        std::string suggestion = closest_match(value, detail::kEventBackends);
        reader_.error(node->source(), "unknown event backend \"" + value + "\"",
                      suggestion.empty() ? "one of: epoll, io_uring, auto"
                                         : "did you mean '" + suggestion + "'?");
      }
    }
    if (const toml::node* node = root.get("batch_wait_us")) {
      int64_t value = 0;
      if (reader_.read_int(*node, "batch_wait_us", 0, event::kBatchWaitUsCeiling, &value))
        config_.batch_wait_us = static_cast<unsigned>(value);
    }
    if (const toml::node* node = root.get("server_header")) {
      std::string value;
      if (reader_.read_string(*node, "server_header", &value)) {
        if (has_control_chars(value)) {
          reader_.error(node->source(), "'server_header' contains control characters");
        } else {
          config_.server_header = value;
        }
      }
    }

    if (const toml::node* node = root.get("limits")) {
      if (const auto* table = node->as_table()) {
        read_limits(reader_, *table, &config_.limits);
      } else {
        reader_.type_error(*node, "limits", "a table", "write a [limits] section");
      }
    }
    if (const toml::node* node = root.get("mime_types")) {
      if (const auto* table = node->as_table()) {
        load_mime_types(*table);
      } else {
        reader_.type_error(*node, "mime_types", "a table", "write a [mime_types] section");
      }
    }

    if (const toml::node* node = root.get("tls")) {
      if (const auto* table = node->as_table()) {
        tls::read_tls_options(reader_, *table, &config_.tls);
      } else {
        reader_.type_error(*node, "tls", "a table", "write a [tls] section");
      }
    }

    if (const toml::node* node = root.get("admin"))  // after listen: its address is checked
      admin::read_admin(reader_, *node, &config_);
    if (const toml::node* node = root.get("client_address"))
      read_client_address(reader_, *node, &config_.client_address);
    if (const toml::node* node = root.get("request_id"))
      read_request_id(reader_, *node, &config_.request_id);

    // Limits and groups before sites: sites and routes refer to them by name.
    if (const toml::node* node = root.get("limit"))
      access::read_limits(reader_, *node, &config_.access);
    if (const toml::node* node = root.get("upstream")) {
      upstream::read_groups(reader_, *node, &config_);
    }

    const toml::node* sites = root.get("site");
    if (sites == nullptr) {
      reader_.error(root.source(), "no [[site]] is defined",
                    "add a [[site]] table, e.g. [[site]] root = \"/var/www/html\"");
    } else if (const auto* array = sites->as_array();
               array != nullptr && (array->empty() || array->is_array_of_tables())) {
      if (array->empty()) {
        reader_.error(sites->source(), "no [[site]] is defined", "add a [[site]] table");
      }
      for (const toml::node& element : *array) load_site(*element.as_table());
      finish_sites();
      tls::check_tls_listeners(reader_, config_);
      check_client_address(reader_, root.get("client_address"), config_);
    } else {
      reader_.type_error(*sites, "site", "an array of tables",
                         "write each site as a [[site]] table (double brackets)");
    }
  }

  void load_listen(const toml::node& node) {
    if (node.is_string() || node.is_table()) {
      load_listen_entry(node);
    } else if (const auto* array = node.as_array()) {
      if (array->empty()) {
        reader_.error(node.source(), "'listen' is empty",
                      "listen on at least one address, e.g. \"*:80\"");
      }
      for (const toml::node& element : *array) load_listen_entry(element);
    } else {
      reader_.type_error(node, "listen", "a string, a table or an array of them",
                         "e.g. listen = [\"127.0.0.1:8080\", \"[::1]:8080\"]");
    }
  }

  void load_listen_entry(const toml::node& node) {
    ListenAddress address;
    const toml::node* text_node = &node;
    if (const auto* table = node.as_table()) {
      reader_.check_keys(*table, kListenKeys, "a listen table");
      text_node = table->get("address");
      if (const toml::node* backlog = table->get("backlog")) {
        int64_t value = 0;
        if (reader_.read_int(*backlog, "listen.backlog", 1, kMaxBacklog, &value)) {
          address.backlog = static_cast<int>(value);
        }
      }
      if (const toml::node* tls = table->get("tls"))
        reader_.read_bool(*tls, "listen.tls", &address.tls);
      address.http2 = address.tls;
      if (const toml::node* http2 = table->get("http2"))
        reader_.read_bool(*http2, "listen.http2", &address.http2);
      if (const toml::node* proxy = table->get("proxy_protocol"))
        reader_.read_bool(*proxy, "listen.proxy_protocol", &address.proxy_protocol);
      if (text_node == nullptr) {
        reader_.error(node.source(), "listen table has no 'address'",
                      "e.g. { address = \"*:80\", backlog = 4096 }");
        return;
      }
      // Who may connect to a unix socket is up to its file's permissions.
      const toml::node* unix_only = nullptr;
      if (const toml::node* mode = table->get("mode")) {
        unix_only = mode;
        std::string text;
        if (reader_.read_string(*mode, "listen.mode", &text)) {
          bool octal = !text.empty() && text.size() <= 4 &&
                       text.find_first_not_of("01234567") == std::string::npos;
          if (octal) {
            address.mode = static_cast<int>(std::stoul(text, nullptr, 8));
          } else {
            reader_.error(mode->source(), "listen.mode '" + text + "' is not an octal file mode",
                          "e.g. mode = \"0660\" (owner and group may connect)");
          }
        }
      }
      for (const char* key : {"owner", "group"}) {
        if (const toml::node* name = table->get(key)) {
          unix_only = name;
          reader_.read_string(*name, "listen."s + key,
                              key[0] == 'o' ? &address.owner : &address.group);
        }
      }
      std::string_view text = text_node->value_or(std::string_view());
      if (unix_only && !text.starts_with("unix:")) {
        reader_.error(unix_only->source(),
                      "mode, owner and group apply only to unix: listen addresses",
                      "e.g. { address = \"unix:/run/peregrine.sock\", mode = \"0660\" }");
      }
    } else if (!node.is_string()) {
      reader_.type_error(node, "listen[]", "a string or a table");
      return;
    }
    std::string text;
    if (!reader_.read_string(*text_node, "listen.address", &text)) return;
    std::string message, hint;
    if (!parse_listen_address(text, &address, &message, &hint)) {
      reader_.error(text_node->source(), message, hint);
      return;
    }
    address.pos = reader_.pos_of(text_node->source());
    // Two ":0" are two different ephemeral ports; two unix sockets at one path are one.
    if (endpoint_port(address.addr) != 0 || address.addr.ss_family == AF_UNIX) {
      for (const ListenAddress& other : config_.listen) {
        if (same_endpoint(other.addr, address.addr)) {
          reader_.error(text_node->source(), "duplicate listen address '" + text + "'",
                        "'" + other.text + "' at line " + std::to_string(other.pos.line) +
                            " already listens there");
          return;
        }
      }
    }
    config_.listen.push_back(std::move(address));
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
        reader_.error(
            key.source(), "invalid file extension '" + std::string(key.str()) + "' in [mime_types]",
            "write the extension without a dot, e.g. webmanifest = \"application/manifest+json\"");
        continue;
      }
      std::string type;
      if (!reader_.read_string(value, "mime_types." + std::string(key.str()), &type)) continue;
      if (type.find('/') == std::string::npos || type.front() == '/' || type.back() == '/' ||
          has_control_chars(type)) {
        reader_.error(value.source(), "invalid media type \"" + type + "\" for '" + extension + "'",
                      "a media type looks like \"text/html\" or \"application/json\"");
        continue;
      }
      auto [it, inserted] = seen.emplace(extension, reader_.pos_of(key.source()));
      if (!inserted) {
        reader_.error(key.source(), "extension '" + extension + "' is listed twice in [mime_types]",
                      "first at line " + std::to_string(it->second.line));
        continue;
      }
      config_.mime_types[extension] = type;
    }
  }

  // A format string with $variables, compiled here once. An error points at the variable's
  // column when the string is on one line without escapes (else at the string).
  void read_custom_log_format(const toml::node& node, const std::string& value, AccessLog* log) {
    std::string message, hint;
    size_t offset = 0;
    const LogEscape escape = log->custom.escape;
    if (!compile_log_format(value, &log->custom, &message, &offset, &hint)) {
      SourcePos pos = reader_.pos_of(node.source());
      const auto& region = node.source();
      const bool plain = region.begin.line == region.end.line &&
                         region.end.column - region.begin.column == value.size() + 2;
      if (plain) pos.column += static_cast<uint32_t>(offset + 1);
      reader_.error(pos, message, hint);
      return;
    }
    log->custom.escape = escape;
    if (log->format != AccessLogFormat::kOff) log->format = AccessLogFormat::kCustom;
    if (log->custom.uses(LogVariable::kRequestId)) config_.request_id.enabled = true;
  }

  void load_site(const toml::table& table) {
    reader_.check_keys(table, kSiteKeys, "[[site]]");
    Site site;
    site.pos = reader_.pos_of(table.source());
    site.access_log.path = "stdout";  // combined format to stdout unless told otherwise
    SiteExtra extra;

    if (const toml::node* node = table.get("hosts")) {
      std::vector<std::pair<std::string, const toml::node*>> hosts;
      reader_.read_string_list(*node, "site.hosts", &hosts);
      for (auto& [host, element] : hosts) {
        std::string hint;
        std::string problem = check_host(&host, &hint);
        if (!problem.empty()) {
          reader_.error(element->source(), problem, hint);
          continue;
        }
        SourcePos here = reader_.pos_of(element->source());
        auto [it, inserted] = hosts_.emplace(host, here);
        if (!inserted) {
          bool same_site =
              std::find(site.hosts.begin(), site.hosts.end(), host) != site.hosts.end();
          reader_.error(element->source(),
                        same_site ? "host '" + host + "' is listed twice"
                                  : "host '" + host + "' is already used by another site",
                        "first at line " + std::to_string(it->second.line));
          continue;
        }
        site.hosts.push_back(host);
      }
    }
    if (const toml::node* node = table.get("default")) {
      if (reader_.read_bool(*node, "site.default", &site.is_default) && site.is_default) {
        extra.default_pos = reader_.pos_of(node->source());
      }
    }
    for (std::string_view key : static_option_keys())
      read_static_option(reader_, table, key, "site.", &site.static_files);
    if (const toml::node* node = table.get("compress"))
      compress::read_options(reader_, *node, "site.compress", &site.compress);
    access::read_options(reader_, table, config_.access, "site", &site.access);
    if (const toml::node* node = table.get("auth"))
      auth::read_options(reader_, *node, "site.auth", /*route=*/false, &site.auth);
    if (const toml::node* node = table.get("headers")) {
      read_header_rules(reader_, *node, "site.headers", HeaderRulesFor::kResponse,
                        &site.headers.rules);
      if (!site.headers.rules.empty()) {
        auto edits = std::make_shared<http::HeaderEdits>();
        edits->then(site.headers.rules);
        site.headers.edits = std::move(edits);
      }
    }

    if (const toml::node* node = table.get("access_log")) {
      std::string value;
      if (reader_.read_string(*node, "site.access_log", &value, false)) {
        detail::apply_access_log(value, reader_.base_dir(), &site.access_log);
      }
    }
    if (const toml::node* node = table.get("access_log_format")) {
      std::string value;
      if (reader_.read_string(*node, "site.access_log_format", &value)) {
        if (value == "combined" || value == "json") {
          if (site.access_log.format != AccessLogFormat::kOff) {
            site.access_log.format =
                value == "json" ? AccessLogFormat::kJson : AccessLogFormat::kCombined;
          }
        } else if (value.find('$') != std::string::npos) {
          read_custom_log_format(*node, value, &site.access_log);
        } else {
          std::string suggestion = closest_match(value, {"combined", "json"});
          reader_.error(node->source(), "unknown access log format \"" + value + "\"",
                        suggestion.empty() ? "one of: combined, json, or a format with $variables"
                                           : "did you mean '" + suggestion + "'?");
        }
      }
    }
    if (const toml::node* node = table.get("access_log_escape")) {
      std::string value;
      if (reader_.read_string(*node, "site.access_log_escape", &value)) {
        if (value == "json") {
          site.access_log.custom.escape = LogEscape::kJson;
        } else if (value != "default") {
          reader_.error(node->source(), "unknown access_log_escape \"" + value + "\"",
                        "one of: default, json");
        }
      }
    }
    if (const toml::node* node = table.get("tls")) tls::read_site_tls(reader_, *node, &site.tls);
    if (const toml::node* node = table.get("error_pages")) {
      if (const auto* pages = node->as_table()) {
        load_error_pages(*pages, &site);
        if (!pages->empty() && table.get("root") == nullptr) {
          reader_.error(node->source(), "'error_pages' needs the site's 'root'",
                        "error pages are files under the site root; add root = \"...\"");
        }
      } else {
        reader_.type_error(*node, "site.error_pages", "a table",
                           "e.g. error_pages = { 404 = \"/errors/404.html\" }");
      }
    }

    if (const toml::node* node = table.get("route")) {
      const auto* routes = node->as_array();
      if (routes != nullptr && (routes->empty() || routes->is_array_of_tables())) {
        for (const toml::node& element : *routes) {
          Route route;
          RouteContext context{reader_, site, groups_, &config_.access};
          if (read_route(context, *element.as_table(), &route))
            site.routes.push_back(std::move(route));
        }
      } else {
        reader_.type_error(*node, "site.route", "an array of tables",
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
      route.type = config_.handlers.default_type();
      route.static_files = site.static_files;
      route.compress = site.compress;
      route.access = site.access;
      route.headers.edits = site.headers.edits;
      route.auth = site.auth;
      route.pos = site.pos;
      if (route.static_files.root.empty() && table.get("root") == nullptr) {
        reader_.error(site.pos, "site has neither a 'root' nor any [[site.route]]",
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
        reader_.error(key.source(),
                      "error page key '" + std::string(code_text) + "' is not a status 400..599",
                      "keys are status codes, e.g. 404 = \"/errors/404.html\"");
        continue;
      }
      std::string path;
      if (!reader_.read_string(value, "site.error_pages." + std::string(code_text), &path))
        continue;
      if (path.empty() || path.front() != '/' || has_control_chars(path) ||
          path.find("/../") != std::string::npos || path.ends_with("/..")) {
        reader_.error(value.source(),
                      "error page \"" + path + "\" must be a path under the site root",
                      "start it with '/', e.g. \"/errors/" + std::string(code_text) + ".html\"");
        continue;
      }
      site->error_pages[code] = path;
      // Not an error: the page may be deployed after the server starts, and until then the
      // status still gets the built-in page. But a typo would otherwise go unnoticed.
      if (!site->static_files.root.empty()) {
        const std::string file = site->static_files.root + path;
        const std::string problem = detail::readable_file_problem(file);
        if (!problem.empty())
          reader_.warn(reader_.pos_of(value.source()),
                       "error page \"" + path + "\" for " + std::string(code_text) + ": " + file +
                           " " + problem,
                       "until it can be read, " + std::string(code_text) +
                           " answers carry the built-in page; create the file or remove the entry");
      }
    }
  }

  // Returns false when the route is unusable (an error was reported).

  void finish_sites() {
    std::vector<size_t> marked, hostless;
    for (size_t i = 0; i < config_.sites.size(); ++i) {
      if (config_.sites[i].is_default) marked.push_back(i);
      if (config_.sites[i].hosts.empty()) hostless.push_back(i);
    }
    for (size_t k = 1; k < marked.size(); ++k) {
      reader_.error(sites_extra_[marked[k]].default_pos, "more than one site is marked default",
                    "the site at line " + std::to_string(config_.sites[marked[0]].pos.line) +
                        " is already the default");
    }
    for (size_t k = 1; k < hostless.size(); ++k) {
      reader_.error(config_.sites[hostless[k]].pos, "more than one site has no 'hosts'",
                    "a site without hosts matches any host, and so does the site at line " +
                        std::to_string(config_.sites[hostless[0]].pos.line) +
                        "; give this one hosts");
    }
    if (!hostless.empty() && !marked.empty() && hostless[0] != marked[0]) {
      reader_.error(config_.sites[hostless[0]].pos,
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

  Config config_;
  Reader reader_;
  upstream::RouteGroups groups_;
  std::map<std::string, SourcePos> hosts_;  // every host of every site -> first declaration
  std::vector<SiteExtra> sites_extra_;      // parallel to config_.sites
};

}  // namespace

const std::vector<std::string_view>& top_keys() {
  return kTopKeys;
}
const std::vector<std::string_view>& limit_keys() {
  return kLimitKeys;
}
const std::vector<std::string_view>& site_keys() {
  return kSiteKeys;
}

void read_limits(Reader& reader, const toml::table& table, Limits* out) {
  reader.check_keys(table, kLimitKeys, "[limits]");
  Limits& limits = *out;
  auto duration = [&](std::string_view key, Millis lo, Millis* out) {
    if (const toml::node* node = table.get(key)) {
      reader.read_duration(*node, "limits." + std::string(key), lo, kMaxDuration, out);
    }
  };
  duration("header_timeout", Millis(1), &limits.header_timeout);
  duration("keepalive_timeout", Millis(0), &limits.keepalive_timeout);
  duration("body_timeout", Millis(1), &limits.body_timeout);
  duration("send_timeout", Millis(1), &limits.send_timeout);
  duration("shutdown_timeout", Millis(0), &limits.shutdown_timeout);
  int64_t n = 0;
  if (const toml::node* node = table.get("max_connections")) {
    if (reader.read_int(*node, "limits.max_connections", 1, kMaxConnections, &n)) {
      limits.max_connections = static_cast<uint32_t>(n);
    }
  }
  if (const toml::node* node = table.get("max_requests_per_connection")) {
    if (reader.read_int(*node, "limits.max_requests_per_connection", 1, UINT32_MAX, &n)) {
      limits.max_requests_per_connection = static_cast<uint32_t>(n);
    }
  }
  uint64_t size = 0;
  if (const toml::node* node = table.get("max_header_bytes")) {
    if (reader.read_size(*node, "limits.max_header_bytes", 1 << 10, 1 << 20, &size)) {
      limits.max_header_bytes = static_cast<uint32_t>(size);
    }
  }
  if (const toml::node* node = table.get("max_body_bytes")) {
    if (reader.read_size(*node, "limits.max_body_bytes", 0, uint64_t{1} << 50, &size)) {
      limits.max_body_bytes = size;
    }
  }
}

std::string ConfigError::to_string() const {
  std::string out = pos.file.empty() ? "<config>" : pos.file;
  if (pos.line != 0) {
    out += ':' + std::to_string(pos.line) + ':' + std::to_string(pos.column);
  }
  out += warning ? ": warning: " : ": error: ";
  out += message;
  if (!hint.empty()) out += " (hint: " + hint + ")";
  return out;
}

LoadResult load_string(std::string_view toml_text, const std::string& source_name,
                       const HandlerSet& handlers) {
  try {
    Loader loader(source_name, detail::directory_of(source_name), handlers);
    return loader.run(toml_text);
  } catch (...) {
    LoadResult result;
    result.errors.push_back({SourcePos{source_name, 0, 0}, "out of memory while loading", ""});
    return result;
  }
}

LoadResult load_file(const std::string& path, const HandlerSet& handlers) {
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
  return load_string(text, path, handlers);
}

}  // namespace peregrine::config