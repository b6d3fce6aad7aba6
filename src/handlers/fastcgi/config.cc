#include "handlers/fastcgi/config.h"

#include <algorithm>
#include <string>

#include "config/reader.h"
#include "config/upstream_address.h"
#include "config/validate.h"
#include "handlers/fastcgi/fastcgi_handler.h"
#include "handlers/fastcgi/options.h"
#include "upstream/config.h"
#include "upstream/group_runtime.h"

namespace peregrine::fastcgi {

namespace {

using config::Reader;
using config::detail::has_control_chars;

const std::vector<std::string_view> kKeys = {"fastcgi",           "split_path",     "try_files",
                                             "fastcgi_params",    "fastcgi_buffer", "check_script",
                                             "fastcgi_pipelining"};

constexpr uint64_t kMaxResponseBuffer = uint64_t{64} << 20;

// A php-fpm child stays with a kept connection while it is open, so idle connections must not
// hold the children the pool's other clients (nginx, cron, another group) wait for.
void adapt_group(config::UpstreamGroup& group) {
  if (!group.keepalive_timeout_written)
    group.keepalive_timeout = upstream::kFastcgiKeepaliveTimeout;
  if (!group.keepalive_written) group.keepalive_leaves_children = true;
}

const config::UpstreamUse kUpstreamUse{
    .protocol = "fastcgi",
    .display_name = "FastCGI",
    .tls_by_scheme = false,
    .health_check = false,
    .address_hint = "; or write an address: \"unix:/run/php/php8.2-fpm.sock\", \"127.0.0.1:9000\"",
    .adapt = adapt_group,
};

void read_try_files(Reader& reader, const toml::node& node, FastcgiOptions* options) {
  std::vector<std::pair<std::string, const toml::node*>> entries;
  if (!reader.read_string_list(node, "site.route.try_files", &entries)) return;
  if (entries.size() < 2) {
    reader.error(node.source(), "'try_files' needs at least two entries",
                 "files to try, then the fallback: [\"$uri\", \"$uri/\", \"/index.php?$args\"] "
                 "or [\"$uri\", \"=404\"]");
    return;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [entry, element] = entries[i];
    const bool last = i + 1 == entries.size();
    if (entry.starts_with('=')) {
      std::string_view code = std::string_view(entry).substr(1);
      if (!last) {
        reader.error(element->source(),
                     "\"" + entry + "\" can only be the last entry of 'try_files'",
                     "a status ends the list: nothing after it would be tried");
      } else if (!config::all_digits(code) || code.size() != 3 || code < "400" || code > "599") {
        reader.error(element->source(), "invalid try_files status \"" + entry + "\"",
                     "write a status 400..599, e.g. \"=404\"");
      } else {
        out.push_back(entry);
      }
      continue;
    }
    if (entry.empty() || has_control_chars(entry) || entry.find(' ') != std::string::npos) {
      reader.error(element->source(), "invalid try_files entry \"" + entry + "\"",
                   "entries are paths such as \"$uri\", \"$uri/\" or \"/index.php?$args\"");
      continue;
    }
    if (entry.front() != '/' && !entry.starts_with("$uri")) {
      reader.error(element->source(),
                   "try_files entry \"" + entry + "\" must start with '/' or $uri",
                   "e.g. \"$uri\", \"$uri/\", \"/index.php?$args\"");
      continue;
    }
    if (!last && entry.find('?') != std::string::npos) {
      reader.error(element->source(), "only the last try_files entry may have a query",
                   "files are tried by path; the fallback URI may carry \"?$args\"");
      continue;
    }
    bool ok = true;
    for (size_t at = entry.find('$'); at != std::string::npos; at = entry.find('$', at + 1)) {
      std::string_view rest = std::string_view(entry).substr(at + 1);
      if (!rest.starts_with("uri") && !rest.starts_with("args")) {
        reader.error(element->source(), "unknown variable in try_files entry \"" + entry + "\"",
                     "try_files may use $uri (the request path) and $args (the query string)");
        ok = false;
        break;
      }
    }
    if (ok) out.push_back(entry);
  }
  options->try_files = std::move(out);
}

// Params are set in the order written.
void read_params(Reader& reader, const toml::table& table, FastcgiOptions* options) {
  for (auto [key, value] : config::in_written_order(table)) {
    std::string name(key->str());
    bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!valid) {
      reader.error(key->source(), "invalid FastCGI parameter name '" + name + "'",
                   "parameter names use letters, digits and '_', e.g. APP_ENV");
      continue;
    }
    std::string text;
    if (!reader.read_string(*value, "site.route.fastcgi_params." + name, &text)) continue;
    if (has_control_chars(text)) {
      reader.error(value->source(), "FastCGI parameter '" + name + "' contains control characters");
      continue;
    }
    options->params.emplace_back(name, text);
  }
}

void read_split_path(Reader& reader, const toml::node& node, FastcgiOptions* options) {
  std::string pattern;
  if (!reader.read_string(node, "site.route.split_path", &pattern, false)) return;
  std::string message;
  size_t offset = 0;
  auto regex = Regex::compile(pattern, &message, &offset);
  int groups = regex != nullptr ? config::detail::regex_capture_count(pattern) : -1;
  if (regex == nullptr) {
    reader.error(
        node.source(),
        "invalid regex \"" + pattern + "\": " + message + " at offset " + std::to_string(offset),
        "PCRE2 syntax, e.g. split_path = '" + std::string(config::kDefaultSplitPath) + "'");
  } else if (groups != 2) {
    reader.error(
        node.source(),
        "'split_path' must have 2 capture groups (SCRIPT_NAME, PATH_INFO), not " +
            std::to_string(groups),
        "e.g. '" + std::string(config::kDefaultSplitPath) + "'; write other groups as (?:...)");
  } else {
    options->split_path = std::move(regex);
  }
}

void read_route(config::RouteContext& context, const toml::table& table, const toml::node& target,
                config::Route* route) {
  Reader& reader = context.reader;
  auto read = std::make_shared<FastcgiOptions>();
  route->options = read;
  FastcgiOptions& options = *read;
  std::string text;
  if (reader.read_string(target, "site.route.fastcgi", &text, false)) {
    const bool address = text.find(':') != std::string::npos;  // group names have no ':'
    options.upstream = context.groups.resolve(reader, target, kUpstreamUse, address ? "" : text,
                                              address ? text : "");
  }
  options.root = route->static_files.root;
  if (options.root.empty() && table.get("root") == nullptr) {
    reader.error(table.source(), "fastcgi route has no root",
                 "set root on the route or on its [[site]]: SCRIPT_FILENAME is the root followed "
                 "by the script's path");
  }
  // The site's index is for static files; a FastCGI route's default is its own.
  if (table.get("index") == nullptr) route->static_files.index = {"index.php"};
  options.index = route->static_files.index;

  options.split_path = config::default_split_path();
  if (const toml::node* node = table.get("split_path")) read_split_path(reader, *node, &options);
  if (const toml::node* node = table.get("try_files")) read_try_files(reader, *node, &options);
  if (const toml::node* node = table.get("fastcgi_params")) {
    if (const auto* params = node->as_table()) {
      read_params(reader, *params, &options);
    } else {
      reader.type_error(*node, "site.route.fastcgi_params", "a table",
                        "e.g. fastcgi_params = { APP_ENV = \"production\" }");
    }
  }
  if (const toml::node* node = table.get("fastcgi_buffer")) {
    reader.read_size(*node, "site.route.fastcgi_buffer", 0, kMaxResponseBuffer,
                     &options.buffer_bytes);
  }
  if (const toml::node* node = table.get("check_script")) {
    reader.read_bool(*node, "site.route.check_script", &options.check_script);
  }
  if (const toml::node* node = table.get("fastcgi_pipelining")) {
    reader.read_bool(*node, "site.route.fastcgi_pipelining", &options.pipelining);
  }
}

class FastcgiType final : public handlers::HandlerType {
 public:
  FastcgiType() {
    name = "fastcgi";
    keys = &kKeys;
    value_form = "\"GROUP or ADDRESS\"";
    example = "e.g. fastcgi = \"unix:/run/php/php8.2-fpm.sock\"";
    foreign_hint =
        "add fastcgi = \"GROUP or ADDRESS\" to send the route to a FastCGI back end such as "
        "php-fpm";
    upstream = &kUpstreamUse;
  }

  // A FastCGI route serves the files that are not scripts itself, with the static options; only
  // a directory listing and alias make no sense for it.
  std::optional<std::string_view> static_key(std::string_view key) const override {
    if (key == "directory_listing") {
      return std::string_view(
          "a directory is answered by its index script (index = [\"index.php\"]) or by "
          "try_files");
    }
    if (key == "alias") {
      return std::string_view(
          "set root: SCRIPT_FILENAME is the root followed by the script's path");
    }
    return std::nullopt;
  }

  void read(config::RouteContext& context, const toml::table& table, const toml::node& selector,
            config::Route* route) const override {
    read_route(context, table, selector, route);
  }

  std::string describe(const config::Route& route) const override {
    return route.options_as<FastcgiOptions>()->upstream;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string* error) const override {
    const FastcgiOptions& options = *context.route.options_as<FastcgiOptions>();
    upstream::GroupRuntime* group = context.group(options.upstream, error);
    if (group == nullptr) return {};
    auto gateway = std::make_shared<FastcgiHandler>(context.route, context.site, *group,
                                                    context.mime, context.env);
    if (!gateway->ok()) {
      *error = context.position() + ": cannot open root " + options.root;
      return {};
    }
    return {nullptr, std::move(gateway)};
  }
};

}  // namespace

const handlers::HandlerType& handler_type() {
  static const FastcgiType type;
  return type;
}

}  // namespace peregrine::fastcgi
