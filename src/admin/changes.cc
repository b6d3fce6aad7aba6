#include "admin/changes.h"

#include <toml++/toml.h>

#include <map>
#include <optional>
#include <set>

namespace peregrine::admin {

namespace {

// toml++ compares tables and arrays deeply, but not two nodes of unknown type.
bool same(const toml::node& a, const toml::node& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case toml::node_type::table:
      return *a.as_table() == *b.as_table();
    case toml::node_type::array:
      return *a.as_array() == *b.as_array();
    case toml::node_type::string:
      return *a.as_string() == *b.as_string();
    case toml::node_type::integer:
      return *a.as_integer() == *b.as_integer();
    case toml::node_type::floating_point:
      return *a.as_floating_point() == *b.as_floating_point();
    case toml::node_type::boolean:
      return *a.as_boolean() == *b.as_boolean();
    case toml::node_type::date:
      return *a.as_date() == *b.as_date();
    case toml::node_type::time:
      return *a.as_time() == *b.as_time();
    case toml::node_type::date_time:
      return *a.as_date_time() == *b.as_date_time();
    default:
      return false;
  }
}

// A site's name in the summary: its hosts, or its position.
std::string site_name(const toml::table& site, size_t index) {
  std::string name;
  if (const toml::array* hosts = site["hosts"].as_array()) {
    for (const toml::node& host : *hosts) {
      if (const auto* text = host.as_string()) {
        if (!name.empty()) name += ',';
        name += text->get();
      }
    }
  }
  return name.empty() ? "#" + std::to_string(index + 1) : name;
}

template <typename Key>
std::map<std::string, const toml::table*> tables_by(const toml::node* array, Key key) {
  std::map<std::string, const toml::table*> out;
  if (const toml::array* list = array ? array->as_array() : nullptr) {
    size_t index = 0;
    for (const toml::node& node : *list) {
      if (const toml::table* table = node.as_table()) out.emplace(key(*table, index), table);
      ++index;
    }
  }
  return out;
}

std::string plural(size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Routes are ordered (the first match wins): compared position by position.
void compare_routes(const std::string& site, const toml::table& before, const toml::table& after,
                    std::vector<std::string>* out) {
  const toml::array* a = before["route"].as_array();
  const toml::array* b = after["route"].as_array();
  const size_t na = a ? a->size() : 0, nb = b ? b->size() : 0;
  size_t changed = 0;
  for (size_t i = 0; i < std::min(na, nb); ++i)
    if (!same((*a)[i], (*b)[i])) ++changed;
  if (nb > na) out->push_back("site " + site + ": " + plural(nb - na, "route") + " added");
  if (na > nb) out->push_back("site " + site + ": " + plural(na - nb, "route") + " removed");
  if (changed) out->push_back("site " + site + ": " + plural(changed, "route") + " changed");
}

}  // namespace

std::vector<std::string> summarize_changes(std::string_view before, std::string_view after) {
  toml::table a, b;
  try {
    a = toml::parse(before);
    b = toml::parse(after);
  } catch (const toml::parse_error&) {
    return {"configuration replaced"};
  }
  std::vector<std::string> out;
  std::set<std::string> keys;
  for (const auto& [key, value] : a) keys.insert(std::string(key.str()));
  for (const auto& [key, value] : b) keys.insert(std::string(key.str()));
  for (const std::string& key : keys) {
    if (key == "site" || key == "upstream") continue;
    const toml::node* x = a.get(key);
    const toml::node* y = b.get(key);
    const std::string name = x && x->is_table()   ? "[" + key + "]"
                             : y && y->is_table() ? "[" + key + "]"
                                                  : key;
    if (!x)
      out.push_back(name + ": added");
    else if (!y)
      out.push_back(name + ": removed");
    else if (!same(*x, *y))
      out.push_back(name + ": changed");
  }

  auto sites_a = tables_by(a.get("site"), site_name);
  auto sites_b = tables_by(b.get("site"), site_name);
  for (const auto& [name, site] : sites_a)
    if (!sites_b.contains(name)) out.push_back("site " + name + ": removed");
  for (const auto& [name, site] : sites_b) {
    auto old = sites_a.find(name);
    if (old == sites_a.end()) {
      out.push_back("site " + name + ": added");
      continue;
    }
    toml::table settings_a = *old->second, settings_b = *site;
    settings_a.erase("route");
    settings_b.erase("route");
    if (!(settings_a == settings_b)) out.push_back("site " + name + ": settings changed");
    compare_routes(name, *old->second, *site, &out);
  }

  auto group_name = [](const toml::table& group, size_t index) {
    std::optional<std::string> name = group["name"].value<std::string>();
    return name ? *name : "#" + std::to_string(index + 1);
  };
  auto groups_a = tables_by(a.get("upstream"), group_name);
  auto groups_b = tables_by(b.get("upstream"), group_name);
  for (const auto& [name, group] : groups_a)
    if (!groups_b.contains(name)) out.push_back("upstream " + name + ": removed");
  for (const auto& [name, group] : groups_b) {
    auto old = groups_a.find(name);
    if (old == groups_a.end())
      out.push_back("upstream " + name + ": added");
    else if (!(*old->second == *group))
      out.push_back("upstream " + name + ": changed");
  }
  return out;
}

}  // namespace peregrine::admin
