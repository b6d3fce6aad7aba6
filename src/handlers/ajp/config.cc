#include "handlers/ajp/config.h"

#include <fstream>
#include <sstream>

#include "config/reader.h"
#include "config/validate.h"
#include "handlers/ajp/ajp_handler.h"
#include "handlers/ajp/options.h"
#include "handlers/ajp/protocol.h"
#include "upstream/config.h"
#include "upstream/group_runtime.h"

namespace peregrine::ajp {

namespace {

using config::Reader;

const std::vector<std::string_view> kKeys = {
    "ajp",        "ajp_secret",     "ajp_secret_file", "ajp_secret_required", "ajp_packet_size",
    "ajp_buffer", "ajp_cping_after"};

constexpr uint64_t kMaxResponseBuffer = uint64_t{64} << 20;

const config::UpstreamUse kUpstreamUse{
    .protocol = "ajp",
    .display_name = "AJP",
    .tls_by_scheme = false,
    // An AJP connector does not speak HTTP: the group's probe is CPING.
    .health_check = true,
    .address_hint = "; or write an address: \"ajp://127.0.0.1:8009\"",
    .adapt = [](config::UpstreamGroup& group) { group.health_check.ajp_cping = true; },
};

bool valid_secret(std::string_view secret) {
  // Sent as an AJP string; Tomcat compares it byte for byte.
  return secret.size() < 1024 && !config::detail::has_control_chars(secret);
}

void read_secret_file(Reader& reader, const toml::node& node, AjpOptions* options) {
  std::string path;
  if (!reader.read_string(node, "site.route.ajp_secret_file", &path, false)) return;
  if (!path.starts_with('/')) path = reader.base_dir() + "/" + path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    reader.error(node.source(), "cannot read ajp_secret_file \"" + path + "\"",
                 reader.relative_hint(path));
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty() || !valid_secret(secret)) {
    reader.error(node.source(), "ajp_secret_file \"" + path + "\" holds no usable secret",
                 "one line of printable characters, the connector's secret=\"...\"");
    return;
  }
  options->secret = std::move(secret);
}

void read_route(config::RouteContext& context, const toml::table& table, const toml::node& target,
                config::Route* route) {
  Reader& reader = context.reader;
  auto read = std::make_shared<AjpOptions>();
  route->options = read;
  AjpOptions& options = *read;
  std::string text;
  if (reader.read_string(target, "site.route.ajp", &text, false)) {
    bool address = false;
    std::string_view rest = strip_scheme(text, &address);
    if (!address && text.find("://") != std::string::npos) {
      reader.error(target.source(),
                   "ajp takes \"ajp://HOST:PORT\" or a group name, not \"" + text + "\"",
                   "e.g. ajp = \"ajp://127.0.0.1:8009\" (Tomcat's AJP connector)");
    } else {
      options.upstream = context.groups.resolve(reader, target, kUpstreamUse, address ? "" : text,
                                                address ? std::string(rest) : "");
    }
  }
  const toml::node* secret = table.get("ajp_secret");
  const toml::node* secret_file = table.get("ajp_secret_file");
  bool required = true;
  if (const toml::node* node = table.get("ajp_secret_required"))
    reader.read_bool(*node, "site.route.ajp_secret_required", &required);
  if (secret && secret_file) {
    reader.error(secret_file->source(), "both ajp_secret and ajp_secret_file are set",
                 "keep one: the file keeps the secret out of the configuration");
  } else if (secret) {
    if (reader.read_string(*secret, "site.route.ajp_secret", &options.secret, false) &&
        !valid_secret(options.secret)) {
      reader.error(secret->source(), "invalid ajp_secret",
                   "printable characters, the same as the connector's secret=\"...\"");
      options.secret.clear();
    }
  } else if (secret_file) {
    read_secret_file(reader, *secret_file, &options);
  } else if (required) {
    reader.error(target.source(), "ajp route has no secret",
                 "Tomcat's AJP connector requires one (secretRequired, since CVE-2020-1938): "
                 "set ajp_secret = \"...\" or ajp_secret_file = \"/etc/peregrine/ajp.secret\" "
                 "to the connector's secret; ajp_secret_required = false to send none");
  }
  if (const toml::node* node = table.get("ajp_packet_size")) {
    uint64_t size = 0;
    if (reader.read_size(*node, "site.route.ajp_packet_size", kMinPacketSize, kMaxPacketSize,
                         &size))
      options.packet_size = static_cast<uint32_t>(size);
  }
  if (const toml::node* node = table.get("ajp_buffer"))
    reader.read_size(*node, "site.route.ajp_buffer", 0, kMaxResponseBuffer, &options.buffer_bytes);
  if (const toml::node* node = table.get("ajp_cping_after"))
    reader.read_duration(*node, "site.route.ajp_cping_after", config::Millis{0},
                         config::Millis{3'600'000}, &options.cping_after);
}

class AjpType final : public handlers::HandlerType {
 public:
  AjpType() {
    name = "ajp";
    keys = &kKeys;
    value_form = "\"GROUP or ajp://HOST:PORT\"";
    example = "e.g. ajp = \"ajp://127.0.0.1:8009\"";
    foreign_hint = "add ajp = \"ajp://HOST:PORT\" to send the route to Tomcat's AJP connector";
    upstream = &kUpstreamUse;
  }

  std::optional<std::string_view> static_key(std::string_view) const override {
    return std::string_view("Tomcat serves the files of an ajp route");
  }

  void read(config::RouteContext& context, const toml::table& table, const toml::node& selector,
            config::Route* route) const override {
    read_route(context, table, selector, route);
  }

  std::string describe(const config::Route& route) const override {
    return route.options_as<AjpOptions>()->upstream;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string* error) const override {
    upstream::GroupRuntime* group =
        context.group(context.route.options_as<AjpOptions>()->upstream, error);
    if (group == nullptr) return {};
    return {nullptr,
            std::make_shared<AjpHandler>(context.route, context.site, *group, context.env)};
  }
};

}  // namespace

std::string_view strip_scheme(std::string_view target, bool* is_address) {
  constexpr std::string_view kScheme = "ajp://";
  if (target.size() > kScheme.size() && target.substr(0, kScheme.size()) == kScheme) {
    *is_address = true;
    std::string_view rest = target.substr(kScheme.size());
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    return rest;
  }
  *is_address = false;
  return target;
}

const handlers::HandlerType& handler_type() {
  static const AjpType type;
  return type;
}

}  // namespace peregrine::ajp
