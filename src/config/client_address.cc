#include "config/client_address.h"

#include <string>
#include <vector>

namespace peregrine::config {
namespace {

const std::vector<std::string_view> kClientAddressKeys = {"trusted_proxies", "header",
                                                          "proxy_protocol_from"};
const std::vector<std::string_view> kRequestIdKeys = {"header", "trust_incoming", "response"};

void read_networks(Reader& reader, const toml::node& node, std::string_view name,
                   std::vector<Cidr>* out) {
  std::vector<std::pair<std::string, const toml::node*>> texts;
  if (!reader.read_string_list(node, name, &texts)) return;
  for (auto& [text, element] : texts) {
    std::string problem;
    if (auto cidr = Cidr::parse(text, &problem)) {
      out->push_back(*cidr);
    } else {
      reader.error(element->source(), std::string(name) + ": " + problem,
                   "a network such as \"10.0.0.0/8\" or \"2001:db8::/32\", or one address");
    }
  }
}

// Header names go on the wire to back ends and into FastCGI's HTTP_ names: a token only.
bool valid_header_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
      return false;
  }
  return true;
}

}  // namespace

void read_client_address(Reader& reader, const toml::node& node, ClientAddress* out) {
  const auto* table = node.as_table();
  if (!table) {
    reader.type_error(node, "client_address", "a table",
                      "write a [client_address] section with trusted_proxies = [...]");
    return;
  }
  reader.check_keys(*table, kClientAddressKeys, "[client_address]");
  if (const toml::node* n = table->get("trusted_proxies"))
    read_networks(reader, *n, "client_address.trusted_proxies", &out->trusted_proxies);
  if (const toml::node* n = table->get("proxy_protocol_from"))
    read_networks(reader, *n, "client_address.proxy_protocol_from", &out->proxy_protocol_from);
  if (const toml::node* n = table->get("header")) {
    std::string value;
    if (reader.read_string(*n, "client_address.header", &value)) {
      std::string lower;
      for (char c : value) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
      if (lower == "x-forwarded-for") {
        out->header = ClientAddressHeader::kXForwardedFor;
      } else if (lower == "forwarded") {
        out->header = ClientAddressHeader::kForwarded;
      } else {
        reader.error(n->source(), "unknown client_address.header \"" + value + "\"",
                     "one of: \"x-forwarded-for\", \"forwarded\"");
      }
    }
  }
}

void read_request_id(Reader& reader, const toml::node& node, RequestIdOptions* out) {
  const auto* table = node.as_table();
  if (!table) {
    reader.type_error(node, "request_id", "a table", "write a [request_id] section");
    return;
  }
  reader.check_keys(*table, kRequestIdKeys, "[request_id]");
  out->enabled = true;
  if (const toml::node* n = table->get("header")) {
    std::string value;
    if (reader.read_string(*n, "request_id.header", &value)) {
      if (valid_header_name(value)) {
        out->header = value;
      } else {
        reader.error(n->source(), "request_id.header \"" + value + "\" is not a header name",
                     "letters, digits and '-', e.g. \"X-Request-Id\"");
      }
    }
  }
  if (const toml::node* n = table->get("trust_incoming"))
    reader.read_bool(*n, "request_id.trust_incoming", &out->trust_incoming);
  if (const toml::node* n = table->get("response"))
    reader.read_bool(*n, "request_id.response", &out->response);
}

void check_client_address(Reader& reader, const toml::node* node, const Config& config) {
  if (!node || config.client_address.proxy_protocol_from.empty()) return;
  for (const ListenAddress& listen : config.listen)
    if (listen.proxy_protocol) return;
  reader.warn(reader.pos_of(node->source()),
              "client_address.proxy_protocol_from is set but no listener has proxy_protocol",
              "add proxy_protocol = true to the listen table that faces the balancer");
}

}  // namespace peregrine::config
