#include "config/header_rules.h"

#include <algorithm>
#include <map>

#include "config/validate.h"
#include "http/header_names.h"

namespace peregrine::config {

namespace {

using detail::to_lower;

bool check_header_name(Reader& reader, const toml::source_region& where, std::string_view name,
                       HeaderRulesFor kind, std::string_view list) {
  if (!detail::is_token(name)) {
    reader.error(where, "invalid header name '" + std::string(name) + "' in " + std::string(list),
                 "header names are tokens such as X-Request-Id");
    return false;
  }
  if (http::is_managed(name)) {
    reader.error(where,
                 "header '" + std::string(name) + "' is managed by the " +
                     (kind == HeaderRulesFor::kResponse ? "server" : "proxy"),
                 "framing and connection headers (Connection, Keep-Alive, Transfer-Encoding, "
                 "Content-Length, TE, Trailer, Upgrade) cannot be changed per route");
    return false;
  }
  const std::string lower = to_lower(name);
  if (kind == HeaderRulesFor::kProxyRequest && lower == "host") {
    reader.error(where, "the Host header is set with 'proxy_host', not in " + std::string(list),
                 "proxy_host = \"pass\", \"upstream\" or a fixed name");
    return false;
  }
  if (kind == HeaderRulesFor::kResponse && lower == "strict-transport-security") {
    reader.error(where,
                 "Strict-Transport-Security is the site's tls setting, not in " + std::string(list),
                 "[[site]] tls = { hsts = \"max-age=31536000\" } (sent only over TLS)");
    return false;
  }
  return true;
}

}  // namespace

void read_header_rules(Reader& reader, const toml::node& node, const std::string& name,
                       HeaderRulesFor kind, http::HeaderRuleSet* out) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    reader.type_error(
        node, name, "a table",
        "e.g. { set = { \"X-A\" = \"1\" }, add = { \"X-B\" = \"2\" }, remove = [\"X-C\"] }");
    return;
  }
  static const std::vector<std::string_view> kKeys = {"set", "add", "remove"};
  static const std::vector<std::string_view> kResponseKeys = {"set", "add", "remove", "always"};
  reader.check_keys(*table, kind == HeaderRulesFor::kResponse ? kResponseKeys : kKeys,
                    "'" + name + "'");
  auto pairs = [&](std::string_view key,
                   std::vector<std::pair<std::string, std::string>>* list_out) {
    const toml::node* list = table->get(key);
    if (list == nullptr) return;
    const std::string list_name = name + "." + std::string(key);
    const auto* headers = list->as_table();
    if (headers == nullptr) {
      reader.type_error(*list, list_name, "a table of header names and values",
                        "e.g. " + std::string(key) + " = { \"X-Env\" = \"production\" }");
      return;
    }
    std::map<std::string, SourcePos> seen;
    for (auto [key_ptr, value] : in_written_order(*headers)) {
      std::string header(key_ptr->str());
      if (!check_header_name(reader, key_ptr->source(), header, kind, "'" + list_name + "'"))
        continue;
      if (auto [it, inserted] = seen.emplace(to_lower(header), reader.pos_of(key_ptr->source()));
          !inserted) {
        reader.error(
            key_ptr->source(), "header '" + header + "' is listed twice in '" + list_name + "'",
            "first at line " + std::to_string(it->second.line) + " (names are case-insensitive)");
        continue;
      }
      std::string text;
      if (!reader.read_string(*value, list_name + "." + header, &text)) continue;
      bool bad = std::any_of(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
      });
      if (bad) {
        reader.error(value->source(),
                     "the value of header '" + header + "' contains control characters");
        continue;
      }
      list_out->emplace_back(header, text);
    }
  };
  pairs("set", &out->set);
  pairs("add", &out->add);
  if (const toml::node* list = table->get("remove")) {
    std::vector<std::pair<std::string, const toml::node*>> names;
    if (reader.read_string_list(*list, name + ".remove", &names)) {
      for (auto& [header, element] : names) {
        if (check_header_name(reader, element->source(), header, kind, "'" + name + ".remove'"))
          out->remove.push_back(header);
      }
    }
  }
  if (const toml::node* flag = table->get("always"))
    reader.read_bool(*flag, name + ".always", &out->always);
}

}  // namespace peregrine::config
