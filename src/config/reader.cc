#include "config/reader.h"

#include <algorithm>

#include "config/registry.h"
#include "config/units.h"
#include "config/validate.h"

namespace peregrine::config {

namespace {

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

}  // namespace

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

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

std::vector<std::pair<const toml::key*, const toml::node*>> in_written_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, value] : table) entries.emplace_back(&key, &value);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return written_before(a.first->source(), b.first->source());
  });
  return entries;
}

std::vector<ConfigError> Reader::take_errors() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
  });
  return std::move(errors_);
}

void Reader::check_keys(const toml::table& table, const std::vector<std::string_view>& allowed,
                        std::string_view section) {
  const std::vector<std::string_view>& route_keys =
      handlers().types().empty() ? common_route_keys() : handlers().route_keys();
  for (auto&& [key, value] : table) {
    std::string_view name = key.str();
    if (contains(allowed, name)) continue;
    std::string where = section.empty() ? "at the top level" : "in " + std::string(section);
    std::string hint;
    std::string suggestion = detail::closest_match(name, allowed);
    if (!suggestion.empty()) {
      hint = "did you mean '" + suggestion + "'?";
    } else if (!section.empty() && contains(top_keys(), name)) {
      hint = "'" + std::string(name) +
             "' is a top-level key; keys after a [section] header belong to that section, so "
             "move it above the first one";
    } else if (section != "[limits]" && contains(limit_keys(), name)) {
      hint = "'" + std::string(name) + "' belongs in [limits]";
    } else if (section.empty() && (contains(site_keys(), name) || contains(route_keys, name))) {
      hint = "'" + std::string(name) + "' is set on a [[site]] (or a [[site.route]])";
    } else if (section == "[[site]]" && contains(route_keys, name)) {
      hint = "'" + std::string(name) + "' belongs in a [[site.route]] table";
    } else if (section == "[[site.route]]" && contains(site_keys(), name)) {
      hint = "'" + std::string(name) + "' is set on the [[site]], not on a route";
    } else if (section == "[[site.route]]" && contains(upstream_keys(), name)) {
      hint = "'" + std::string(name) +
             "' is set on an [[upstream]] group; name the group in the route's fastcgi or proxy";
    } else if (section == "[[upstream]]" && contains(route_keys, name)) {
      hint = "'" + std::string(name) + "' is set on a [[site.route]], not on an [[upstream]]";
    } else {
      hint = "valid keys: " + join(allowed);
    }
    error(key.source(), "unknown key '" + std::string(name) + "' " + where, hint);
  }
}

void Reader::type_error(const toml::node& node, std::string_view name, std::string_view expected,
                        std::string hint) {
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

bool Reader::read_string(const toml::node& node, std::string_view name, std::string* out,
                         bool allow_empty) {
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

bool Reader::read_bool(const toml::node& node, std::string_view name, bool* out) {
  const auto* b = node.as_boolean();
  if (b == nullptr) {
    type_error(node, name, "a boolean");
    return false;
  }
  *out = b->get();
  return true;
}

bool Reader::read_int(const toml::node& node, std::string_view name, int64_t lo, int64_t hi,
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

bool Reader::read_duration(const toml::node& node, std::string_view name, Millis lo, Millis hi,
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
      error(node.source(), "invalid duration \"" + s->get() + "\" for '" + std::string(name) + "'",
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

bool Reader::read_size(const toml::node& node, std::string_view name, uint64_t lo, uint64_t hi,
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
                             "; it must be between " + format_size(lo) + " and " + format_size(hi));
    return false;
  }
  *out = value;
  return true;
}

bool Reader::read_string_list(const toml::node& node, std::string_view name,
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

std::string Reader::relative_hint(std::string_view path) const {
  if (!path.empty() && path.front() != '/') {
    return "relative paths are resolved against the config file's directory, " + base_dir_;
  }
  return "";
}

}  // namespace peregrine::config
