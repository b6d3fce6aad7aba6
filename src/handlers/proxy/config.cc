#include "handlers/proxy/config.h"

#include <algorithm>
#include <string>

#include "config/header_rules.h"
#include "config/reader.h"
#include "config/upstream_address.h"
#include "config/validate.h"
#include "handlers/proxy/options.h"
#include "handlers/proxy/proxy_handler.h"
#include "upstream/config.h"
#include "upstream/group_runtime.h"

namespace peregrine::proxy {

namespace {

using config::Reader;

const std::vector<std::string_view> kKeys = {"proxy",
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
                                             "tunnel_timeout",
                                             "tls_ca",
                                             "tls_verify",
                                             "tls_server_name",
                                             "tls_certificate",
                                             "tls_key"};

constexpr uint64_t kMaxResponseBuffer = uint64_t{64} << 20;

const config::UpstreamUse kUpstreamUse{
    .protocol = "proxy",
    .display_name = "HTTP",
    .tls_by_scheme = true,
    .health_check = true,
    .address_hint =
        "; or write an address: \"http://127.0.0.1:8080\", \"http://unix:/run/app.sock:\"",
    .adapt = nullptr,
};

// The host part of an upstream address ("127.0.0.1:8443" -> "127.0.0.1", "[::1]:443" -> "::1"):
// what an implicit https group verifies in the certificate by default.
std::string host_of(std::string_view address) {
  if (address.starts_with('[')) {
    size_t end = address.find(']');
    return std::string(address.substr(1, end == std::string_view::npos ? end : end - 1));
  }
  return std::string(address.substr(0, address.rfind(':')));
}

void read_route(config::RouteContext& context, const toml::table& table, const toml::node& target,
                config::Route* route) {
  Reader& reader = context.reader;
  auto read = std::make_shared<ProxyOptions>();
  route->options = read;
  ProxyOptions& options = *read;
  const bool prefix_route = route->match == config::MatchKind::kPrefix;
  // An exact route's whole path is its "prefix": a path in the URL replaces it, which is how
  // nginx's internal `rewrite ^/$ /index.html` is written here (exact = "/").
  const bool replaceable = prefix_route || route->match == config::MatchKind::kExact;
  if (replaceable) options.path_prefix = route->pattern;
  std::string text;
  config::ProxyUrl url;
  if (reader.read_string(target, "site.route.proxy", &text, false)) {
    std::string message, hint;
    if (!config::parse_proxy_url(text, &url, &message, &hint)) {
      reader.error(target.source(), message, hint);
    } else {
      std::string address = url.address;
      const bool declared = !url.name.empty() && context.groups.find(url.name) != nullptr;
      if (!url.name.empty() && !declared) {
        address = url.default_port_address;  // "http://127.0.0.1" is port 80 (https: 443)
      }
      config::UpstreamTls tls;
      tls.enabled = url.tls;
      tls.pos = reader.pos_of(target.source());
      const toml::node* tls_key = nullptr;
      for (std::string_view key : upstream::tls_keys())
        if (!tls_key) tls_key = table.get(key);
      if (tls_key && !url.tls) {
        reader.error(tls_key->source(), "TLS settings on a route that proxies to http://",
                     "write proxy = \"https://...\" to reach the back end over TLS");
      } else if (tls_key && declared) {
        reader.error(tls_key->source(),
                     "TLS settings for upstream '" + url.name + "' belong to its [[upstream]]",
                     "move the tls_* keys to the [[upstream]] named '" + url.name + "'");
      } else if (url.tls && !declared) {
        upstream::read_tls_keys(reader, table, "site.route", host_of(address), &tls);
      }
      if (url.tls) options.scheme = "https";
      options.upstream =
          context.groups.resolve(reader, target, kUpstreamUse, url.name, address, &tls);
      if (!url.path.empty()) {
        if (replaceable) {
          options.path = url.path;
        } else {
          reader.error(target.source(), "a path in 'proxy' needs a prefix or exact route",
                       "the path replaces the matched prefix (or exact path); use prefix = "
                       "\"/dir/\", or drop the path to pass the request path unchanged");
        }
      }
    }
  }
  if (const toml::node* node = table.get("strip_prefix")) {
    if (reader.read_bool(*node, "site.route.strip_prefix", &options.strip_prefix) &&
        options.strip_prefix) {
      if (!prefix_route) {
        reader.error(node->source(), "'strip_prefix' needs a prefix route",
                     "it removes the matched prefix, e.g. with prefix = \"/api/\"");
      } else if (!url.path.empty()) {
        reader.error(node->source(), "'strip_prefix' cannot be combined with a path in 'proxy'",
                     "the path in the URL already replaces the prefix; remove one of them");
      }
    }
  }
  if (const toml::node* node = table.get("proxy_host")) {
    std::string host;
    if (reader.read_string(*node, "site.route.proxy_host", &host, false)) {
      if (host == "pass") {
        options.host_mode = ProxyHostMode::kPass;
      } else if (host == "upstream") {
        options.host_mode = ProxyHostMode::kUpstream;
      } else if (config::detail::valid_host_header(host)) {
        options.host_mode = ProxyHostMode::kFixed;
        options.fixed_host = host;
      } else {
        reader.error(node->source(), "invalid proxy_host \"" + host + "\"",
                     "\"pass\" (the client's Host), \"upstream\" (the server's address) or a "
                     "fixed host name such as \"app.internal\"");
      }
    }
  }
  if (const toml::node* node = table.get("x_forwarded")) {
    bool on = true;
    if (reader.read_bool(*node, "site.route.x_forwarded", &on)) {
      options.x_forwarded_for = options.x_forwarded_proto = options.x_forwarded_host =
          options.x_real_ip = on;
    }
  }
  auto flag = [&](std::string_view key, bool* out) {
    if (const toml::node* node = table.get(key)) {
      reader.read_bool(*node, "site.route." + std::string(key), out);
    }
  };
  flag("forwarded", &options.forwarded);
  flag("rewrite_location", &options.rewrite_location);
  flag("intercept_errors", &options.intercept_errors);
  flag("websocket", &options.websocket);
  if (const toml::node* node = table.get("request_headers")) {
    http::HeaderRuleSet rules;
    config::read_header_rules(reader, *node, "site.route.request_headers",
                              config::HeaderRulesFor::kProxyRequest, &rules);
    options.request_remove = std::move(rules.remove);
    options.request_set = std::move(rules.set);
    options.request_add = std::move(rules.add);
  }
  if (const toml::node* node = table.get("response_headers")) {
    http::HeaderRuleSet rules;
    config::read_header_rules(reader, *node, "site.route.response_headers",
                              config::HeaderRulesFor::kProxyResponse, &rules);
    options.response_remove = std::move(rules.remove);
    options.response_set = std::move(rules.set);
    options.response_add = std::move(rules.add);
  }
  if (const toml::node* node = table.get("proxy_buffer")) {
    reader.read_size(*node, "site.route.proxy_buffer", 0, kMaxResponseBuffer,
                     &options.buffer_bytes);
  }
  if (const toml::node* node = table.get("proxy_temp_file_max")) {
    reader.read_size(*node, "site.route.proxy_temp_file_max", 0, uint64_t{1} << 50,
                     &options.max_temp_file_bytes);
  }
  if (const toml::node* node = table.get("tunnel_timeout")) {
    reader.read_duration(*node, "site.route.tunnel_timeout", config::Millis(1),
                         config::kMaxDuration, &options.tunnel_idle_timeout);
  }
}

class ProxyType final : public handlers::HandlerType {
 public:
  ProxyType() {
    name = "proxy";
    keys = &kKeys;
    value_form = "\"URL\"";
    example = "e.g. proxy = \"http://127.0.0.1:8080\"";
    foreign_hint = "add proxy = \"http://...\" to send the route to an HTTP back end";
    upstream = &kUpstreamUse;
  }

  // The back end serves the content: no static option applies.
  std::optional<std::string_view> static_key(std::string_view key) const override {
    if (key == "alias") {
      return std::string_view(
          "to replace the prefix on the way to the back end, give proxy a path: proxy = "
          "\"http://app/new/\", or set strip_prefix = true");
    }
    return std::string_view(
        "the back end serves the content; static options go on static (or application) routes");
  }

  void read(config::RouteContext& context, const toml::table& table, const toml::node& selector,
            config::Route* route) const override {
    read_route(context, table, selector, route);
  }

  std::string describe(const config::Route& route) const override {
    const ProxyOptions& options = *route.options_as<ProxyOptions>();
    return options.scheme + "://" + options.upstream;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string* error) const override {
    const ProxyOptions& options = *context.route.options_as<ProxyOptions>();
    upstream::GroupRuntime* group = context.group(options.upstream, error);
    if (group == nullptr) return {};
    return {nullptr, std::make_shared<ProxyHandler>(options, *group, context.env.poller,
                                                    context.env.timers, context.env.clock)};
  }
};

}  // namespace

const handlers::HandlerType& handler_type() {
  static const ProxyType type;
  return type;
}

}  // namespace peregrine::proxy
