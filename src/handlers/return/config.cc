#include "handlers/return/config.h"

#include <string>

#include "config/reader.h"
#include "config/validate.h"
#include "handlers/return/options.h"
#include "handlers/return/return_handler.h"

namespace peregrine::return_route {

namespace {

using config::MatchKind;
using config::Reader;
using config::detail::has_control_chars;

const std::vector<std::string_view> kKeys = {"return", "location", "body", "content_type"};

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// $0..$9 (regex routes only; $0 is the whole match), $uri, $request_uri and $host are the only
// substitutions.
void check_location(Reader& reader, const toml::node& node, const std::string& location,
                    MatchKind match) {
  if (has_control_chars(location)) {
    reader.error(node.source(), "'location' contains control characters");
    return;
  }
  for (size_t i = 0; i < location.size(); ++i) {
    if (location[i] != '$') continue;
    std::string_view rest = std::string_view(location).substr(i + 1);
    if (!rest.empty() && rest[0] >= '0' && rest[0] <= '9') {
      if (match != MatchKind::kRegex) {
        reader.error(
            node.source(),
            "'location' uses $" + std::string(1, rest[0]) + " but the route is not a regex route",
            "captures come from regex = \"...\" groups; $uri is the request path");
      }
      continue;
    }
    if (rest.starts_with("uri") || rest.starts_with("host") || rest.starts_with("request_uri"))
      continue;
    reader.error(node.source(), "unknown variable in 'location' (\"" + location + "\")",
                 "location may use $1..$9 (regex captures, $0 the whole match), $uri (the "
                 "request path), $request_uri (the path and query as sent) and $host");
    return;
  }
}

void read_route(config::RouteContext& context, const toml::table& table,
                const toml::node& status_node, config::Route* route) {
  Reader& reader = context.reader;
  auto read = std::make_shared<ReturnOptions>();
  route->options = read;
  ReturnOptions& options = *read;
  int64_t status = 0;
  if (!reader.read_int(status_node, "site.route.return", 100, 599, &status)) return;
  options.status = static_cast<int>(status);
  const toml::node* location = table.get("location");
  if (is_redirect(options.status)) {
    if (location == nullptr) {
      reader.error(table.source(), "'return = " + std::to_string(status) + "' needs a 'location'",
                   "e.g. location = \"/new/path\" or \"https://example.com$uri\"");
    } else if (reader.read_string(*location, "site.route.location", &options.location, false)) {
      check_location(reader, *location, options.location, route->match);
    }
  } else if (location != nullptr) {
    reader.error(
        location->source(),
        "'location' is only for redirects (301, 302, 303, 307, 308), not " + std::to_string(status),
        "remove it, or return a redirect status");
  }
  if (const toml::node* node = table.get("body")) {
    reader.read_string(*node, "site.route.body", &options.body);
    if (status < 200 || status == 204 || status == 304) {
      reader.error(node->source(), "status " + std::to_string(status) + " cannot have a body");
    }
  }
  if (const toml::node* node = table.get("content_type")) {
    if (reader.read_string(*node, "site.route.content_type", &options.content_type, false) &&
        (has_control_chars(options.content_type) ||
         options.content_type.find('/') == std::string::npos)) {
      reader.error(node->source(), "invalid content type \"" + options.content_type + "\"",
                   "e.g. \"text/html; charset=utf-8\"");
    }
  }
}

class ReturnType final : public handlers::HandlerType {
 public:
  ReturnType() {
    name = "return";
    selection = Selection::kKeyOrHandler;
    keys = &kKeys;
    value_form = "STATUS";
    example = "e.g. return = 200 and body = \"...\"";
    foreign_hint = "add return = STATUS, e.g. return = 301 with location";
    // A token outside these (a WebDAV method, say) gets 405 with this Allow.
    default_methods = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH, TRACE";
  }

  // A return route answers by itself: no static option applies.
  std::optional<std::string_view> static_key(std::string_view key) const override {
    if (key == "alias") return std::string_view();
    return std::string_view("static options go on static (or application) routes");
  }

  void read(config::RouteContext& context, const toml::table& table, const toml::node& selector,
            config::Route* route) const override {
    read_route(context, table, selector, route);
  }

  std::string describe(const config::Route& route) const override {
    const ReturnOptions& options = *route.options_as<ReturnOptions>();
    std::string target = std::to_string(options.status);
    if (!options.location.empty()) target += " " + options.location;
    return target;
  }

  std::optional<int> fixed_status(const config::Route& route) const override {
    return route.options_as<ReturnOptions>()->status;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string*) const override {
    const config::Route& route = context.route;
    return {std::make_shared<ReturnHandler>(*route.options_as<ReturnOptions>(), route.regex),
            nullptr};
  }
};

}  // namespace

const handlers::HandlerType& handler_type() {
  static const ReturnType type;
  return type;
}

}  // namespace peregrine::return_route
