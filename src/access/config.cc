#include "access/config.h"

#include <charconv>
#include <cmath>
#include <map>

#include "access/limit_table.h"
#include "config/validate.h"

namespace peregrine::access {

namespace {

using config::Reader;

const std::vector<std::string_view> kLimitKeys = {
    "name", "rate", "burst", "mode", "connections", "key", "status", "size", "log_interval"};

constexpr uint64_t kDefaultTableBytes = 1 << 20;  // 32,768 keys

std::string parse_key(std::string_view text, Limit* limit) {
  if (text == "$remote_addr" || text == "$binary_remote_addr" || text == "addr") {
    limit->key = KeyKind::kAddress;
    return "";
  }
  auto header_ok = [](std::string_view name) {
    return !name.empty() && config::detail::is_token(name);
  };
  auto cookie_ok = [](std::string_view name) {
    if (name.empty()) return false;
    for (char c : name)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == ';' || c == '=' || c == ',' ||
          c == '"')
        return false;
    return true;
  };
  if (text.starts_with("$http_")) {
    std::string name = config::detail::to_lower(text.substr(6));
    if (!header_ok(name)) return "invalid header name in key \"" + std::string(text) + "\"";
    for (char& c : name)
      if (c == '_') c = '-';  // as nginx spells $http_x_api_key
    limit->key = KeyKind::kHeader;
    limit->key_name = std::move(name);
    return "";
  }
  if (text.starts_with("$cookie_")) {
    std::string_view name = text.substr(8);
    if (!cookie_ok(name)) return "invalid cookie name in key \"" + std::string(text) + "\"";
    limit->key = KeyKind::kCookie;
    limit->key_name = std::string(name);
    return "";
  }
  return "unknown key \"" + std::string(text) + "\"";
}

void read_limit(Reader& reader, const toml::table& table, std::map<std::string, int>* lines,
                Definitions* definitions) {
  reader.check_keys(table, kLimitKeys, "[[limit]]");
  auto limit = std::make_shared<Limit>();
  const toml::node* name_node = table.get("name");
  if (!name_node) {
    reader.error(table.source(), "[[limit]] has no 'name'",
                 "name it, e.g. name = \"login\", and refer to it with limit = [\"login\"]");
    return;
  }
  if (!reader.read_string(*name_node, "limit.name", &limit->name, false)) return;
  auto [it, fresh] = lines->emplace(limit->name, name_node->source().begin.line);
  if (!fresh) {
    reader.error(name_node->source(), "limit \"" + limit->name + "\" is defined twice",
                 "first at line " + std::to_string(it->second) + "; give this one another name");
    return;
  }
  const toml::node* rate = table.get("rate");
  const toml::node* connections = table.get("connections");
  if (rate && connections) {
    reader.error(connections->source(), "a limit has either 'rate' or 'connections', not both",
                 "define two limits and list both: limit = [\"a\", \"b\"]");
    return;
  }
  if (!rate && !connections) {
    reader.error(table.source(),
                 "limit \"" + limit->name + "\" has neither 'rate' nor 'connections'",
                 "add rate = \"10r/s\" (requests) or connections = 10 (at once, per client)");
    return;
  }
  limit->connections_limit = connections != nullptr;
  limit->status = limit->connections_limit ? 503 : 429;
  if (rate) {
    std::string text;
    if (reader.read_string(*rate, "limit.rate", &text) && !parse_rate(text, &limit->interval_us))
      reader.error(rate->source(), "invalid rate \"" + text + "\"",
                   "write requests per second or minute, e.g. \"5r/s\" or \"30r/m\"");
  } else {
    int64_t n = 0;
    if (reader.read_int(*connections, "limit.connections", 1, 1 << 20, &n))
      limit->max_connections = static_cast<uint32_t>(n);
  }
  if (const toml::node* node = table.get("burst")) {
    int64_t n = 0;
    if (limit->connections_limit)
      reader.error(node->source(), "'burst' applies to a rate limit", "remove it");
    else if (reader.read_int(*node, "limit.burst", 0, 1'000'000, &n))
      limit->burst = static_cast<uint32_t>(n);
  }
  if (const toml::node* node = table.get("mode")) {
    std::string mode;
    if (limit->connections_limit) {
      reader.error(node->source(), "'mode' applies to a rate limit", "remove it");
    } else if (reader.read_string(*node, "limit.mode", &mode)) {
      if (mode == "delay" || mode == "reject")
        limit->delay = mode == "delay";
      else
        reader.error(node->source(), "unknown mode \"" + mode + "\"",
                     "\"reject\" answers early requests beyond the burst at once (nginx's "
                     "nodelay); \"delay\" holds them back to the rate");
    }
  }
  if (const toml::node* node = table.get("key")) {
    std::string text;
    if (reader.read_string(*node, "limit.key", &text)) {
      std::string problem = parse_key(text, limit.get());
      if (!problem.empty())
        reader.error(node->source(), problem,
                     "write \"$remote_addr\" (the client address), \"$http_NAME\" (a header) or "
                     "\"$cookie_NAME\"");
      else if (limit->connections_limit && limit->key != KeyKind::kAddress)
        reader.error(node->source(), "connections are counted by client address only",
                     "write key = \"$remote_addr\" or leave it out");
    }
  }
  if (const toml::node* node = table.get("status")) {
    int64_t n = 0;
    if (reader.read_int(*node, "limit.status", 400, 599, &n)) limit->status = static_cast<int>(n);
  }
  uint64_t bytes = kDefaultTableBytes;
  if (const toml::node* node = table.get("size"))
    reader.read_size(*node, "limit.size", kSlotBytes * kProbe, uint64_t{1} << 32, &bytes);
  limit->slots = static_cast<uint32_t>(std::min<uint64_t>(bytes / kSlotBytes, uint64_t{1} << 27));
  if (const toml::node* node = table.get("log_interval")) {
    config::Millis interval{};
    if (reader.read_duration(*node, "limit.log_interval", config::Millis{1}, config::kMaxDuration,
                             &interval))
      limit->log_interval_ms = interval.count();
  }
  limit->table = std::make_shared<LimitTable>(limit->slots);
  definitions->limits.push_back(std::move(limit));
}

void read_rules(Reader& reader, const toml::node& node, std::string_view name,
                std::vector<Rule>* rules) {
  const auto* array = node.as_array();
  constexpr std::string_view kHint =
      "write access = [ { allow = \"10.0.0.0/8\" }, { deny = \"all\" } ]";
  if (!array) {
    reader.type_error(node, name, "an array of tables", std::string(kHint));
    return;
  }
  rules->clear();
  for (const toml::node& element : *array) {
    const auto* table = element.as_table();
    if (!table) {
      reader.type_error(element, name, "a table such as { deny = \"all\" }", std::string(kHint));
      continue;
    }
    const toml::node* allow = table->get("allow");
    const toml::node* deny = table->get("deny");
    reader.check_keys(*table, {"allow", "deny"}, "an access rule");
    if ((allow != nullptr) == (deny != nullptr)) {
      reader.error(element.source(), "an access rule has exactly one of 'allow' and 'deny'",
                   "one rule per table, in order: first match wins");
      continue;
    }
    Rule rule;
    rule.allow = allow != nullptr;
    const toml::node& value = allow ? *allow : *deny;
    std::string text;
    if (!reader.read_string(value, rule.allow ? "allow" : "deny", &text, false)) continue;
    if (text == "all") {
      rule.all = true;
    } else {
      std::string problem;
      std::optional<Cidr> network = Cidr::parse(text, &problem);
      if (!network) {
        reader.error(value.source(), "invalid network \"" + text + "\": " + problem,
                     "write an address or CIDR (\"192.0.2.0/24\", \"2001:db8::/32\") or \"all\"");
        continue;
      }
      rule.network = *network;
    }
    rules->push_back(rule);
  }
}

}  // namespace

const std::vector<std::string_view>& limit_keys() {
  return kLimitKeys;
}

bool parse_rate(std::string_view text, int64_t* interval_us) {
  int64_t per_us;
  if (text.ends_with("r/s")) {
    per_us = 1'000'000;
  } else if (text.ends_with("r/m")) {
    per_us = 60'000'000;
  } else {
    return false;
  }
  std::string_view number = text.substr(0, text.size() - 3);
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || number.empty() || !(value > 0) ||
      !std::isfinite(value))
    return false;
  const double interval = static_cast<double>(per_us) / value;
  if (interval < 1 || interval > 1e12) return false;
  *interval_us = static_cast<int64_t>(std::llround(interval));
  return true;
}

void read_limits(Reader& reader, const toml::node& node, Definitions* definitions) {
  const auto* array = node.as_array();
  if (array == nullptr || !(array->empty() || array->is_array_of_tables())) {
    reader.type_error(node, "limit", "an array of tables",
                      "write each limit as a [[limit]] table (double brackets)");
    return;
  }
  std::map<std::string, int> lines;
  for (const toml::node& element : *array)
    read_limit(reader, *element.as_table(), &lines, definitions);
}

void read_options(Reader& reader, const toml::table& table, const Definitions& definitions,
                  std::string_view section, Options* options) {
  if (const toml::node* node = table.get("access"))
    read_rules(reader, *node, std::string(section) + ".access", &options->rules);
  if (const toml::node* node = table.get("limit")) {
    std::vector<std::pair<std::string, const toml::node*>> names;
    if (!reader.read_string_list(*node, std::string(section) + ".limit", &names)) return;
    options->limits.clear();
    for (auto& [name, element] : names) {
      std::shared_ptr<const Limit> found;
      for (const auto& limit : definitions.limits)
        if (limit->name == name) found = limit;
      if (!found) {
        std::string known;
        for (const auto& limit : definitions.limits)
          known.append(known.empty() ? "" : ", ").append("\"" + limit->name + "\"");
        reader.error(element->source(), "no [[limit]] named \"" + name + "\"",
                     known.empty() ? "define it: [[limit]] name = \"" + name + "\" rate = \"10r/s\""
                                   : "defined limits: " + known);
        continue;
      }
      bool twice = false;
      for (const auto& limit : options->limits) twice |= limit == found;
      if (twice) {
        reader.error(element->source(), "limit \"" + name + "\" is listed twice", "list it once");
        continue;
      }
      options->limits.push_back(std::move(found));
    }
  }
}

}  // namespace peregrine::access
