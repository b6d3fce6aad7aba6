#include "auth/config.h"

#include <fstream>
#include <memory>
#include <sstream>

#include "auth/htpasswd.h"
#include "config/validate.h"

namespace peregrine::auth {

namespace {

const std::vector<std::string_view> kKeys = {"htpasswd", "realm"};
constexpr std::string_view kDefaultRealm = "Restricted";
constexpr size_t kMaxFileBytes = size_t{64} << 20;

bool realm_is_valid(std::string_view realm) {
  for (unsigned char c : realm)
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') return false;
  return true;
}

}  // namespace

void read_options(config::Reader& reader, const toml::node& node, std::string_view name, bool route,
                  config::AuthOptions* out) {
  const std::string key(name);
  if (const auto* text = node.as_string()) {
    if (route && text->get() == "off") {
      *out = config::AuthOptions{};
      return;
    }
    reader.error(node.source(), "'" + key + "' must be a table" + (route ? " or \"off\"" : ""),
                 "e.g. auth = { htpasswd = \"/etc/peregrine/htpasswd\", realm = \"Staging\" }" +
                     std::string(route ? "; auth = \"off\" lifts the site's" : ""));
    return;
  }
  const auto* table = node.as_table();
  if (table == nullptr) {
    reader.type_error(
        node, key, route ? "a table or \"off\"" : "a table",
        "e.g. auth = { htpasswd = \"/etc/peregrine/htpasswd\", realm = \"Staging\" }");
    return;
  }
  reader.check_keys(*table, kKeys, "'" + key + "'");
  std::string realm(kDefaultRealm);
  if (const toml::node* realm_node = table->get("realm")) {
    if (reader.read_string(*realm_node, key + ".realm", &realm, false) && !realm_is_valid(realm)) {
      reader.error(realm_node->source(),
                   "the realm holds a quote, a backslash or a control character",
                   "a realm is shown to users as a plain name, e.g. \"Staging\"");
      return;
    }
  }
  const toml::node* file_node = table->get("htpasswd");
  if (file_node == nullptr) {
    reader.error(node.source(), "'" + key + "' needs 'htpasswd'",
                 "the file of users: create it with htpasswd -cB FILE USER");
    return;
  }
  std::string path;
  if (!reader.read_string(*file_node, key + ".htpasswd", &path, false)) return;
  path = config::detail::absolute_path(path, reader.base_dir());
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    std::string hint = reader.relative_hint(path);
    reader.error(file_node->source(), "cannot read htpasswd file " + path,
                 hint.empty() ? "it must exist and be readable by the user that loads the "
                                "configuration (create it with htpasswd -cB FILE USER)"
                              : hint);
    return;
  }
  const std::string content = std::move(text).str();
  if (content.size() > kMaxFileBytes) {
    reader.error(file_node->source(), "htpasswd file " + path + " is larger than 64 MB");
    return;
  }
  std::vector<HtpasswdProblem> problems;
  auto users = std::make_shared<Htpasswd>(Htpasswd::parse(content, &problems));
  for (const HtpasswdProblem& p : problems) {
    reader.error(
        file_node->source(),
        path + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + p.message,
        p.hint);
  }
  if (!problems.empty()) return;
  if (users->size() == 0) {
    reader.error(file_node->source(), "htpasswd file " + path + " has no users",
                 "add one with htpasswd -B " + path + " USER; every request would be refused");
    return;
  }
  out->users = std::move(users);
  out->file = path;
  out->challenge = "Basic realm=\"" + realm + "\", charset=\"UTF-8\"";
}

}  // namespace peregrine::auth
