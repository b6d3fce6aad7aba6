#include "upstream/config.h"

#include <algorithm>
#include <cstring>

#include "config/upstream_address.h"
#include "config/validate.h"
#include "core/log.h"
#include "tls/client_context.h"

namespace peregrine::upstream {

namespace {

using config::HashKey;
using config::HealthCheck;
using config::Millis;
using config::Reader;
using config::UpstreamGroup;
using config::UpstreamServer;
using config::detail::closest_match;
using config::detail::has_control_chars;

const std::vector<std::string_view> kGroupKeys = {"name",
                                                  "balance",
                                                  "hash_key",
                                                  "max_fails",
                                                  "fail_timeout",
                                                  "keepalive",
                                                  "keepalive_timeout",
                                                  "keepalive_requests",
                                                  "queue",
                                                  "queue_timeout",
                                                  "connect_timeout",
                                                  "send_timeout",
                                                  "read_timeout",
                                                  "tries",
                                                  "try_timeout",
                                                  "servers",
                                                  "server",
                                                  "health_check",
                                                  "tls",
                                                  "tls_ca",
                                                  "tls_verify",
                                                  "tls_server_name",
                                                  "tls_certificate",
                                                  "tls_key"};
const std::vector<std::string_view> kTlsKeys = {"tls_ca", "tls_verify", "tls_server_name",
                                                "tls_certificate", "tls_key"};
const std::vector<std::string_view> kServerKeys = {"address", "weight", "backup", "max_conns",
                                                   "route"};
const std::vector<std::string_view> kHealthCheckKeys = {"path",   "host", "interval", "timeout",
                                                        "status", "rise", "fall"};
const std::vector<std::string_view> kBalanceNames = {"round_robin", "least_conn", "ip_hash",
                                                     "hash"};

constexpr int64_t kMaxQueue = 1 << 20;
constexpr int64_t kMaxConnsPerServer = 1 << 20;

void add_server(Reader& reader, const toml::source_region& where, UpstreamServer server,
                UpstreamGroup* group) {
  for (const UpstreamServer& other : group->servers) {
    if (other.addr_len == server.addr_len &&
        std::memcmp(&other.addr, &server.addr, server.addr_len) == 0) {
      reader.error(
          where,
          "server '" + server.address + "' is listed twice in upstream '" + group->name + "'",
          "first at line " + std::to_string(other.pos.line) +
              "; to send it more requests, give it a weight");
      return;
    }
  }
  group->servers.push_back(std::move(server));
}

void read_server(Reader& reader, const toml::table& table, UpstreamGroup* group) {
  reader.check_keys(table, kServerKeys, "[[upstream.server]]");
  UpstreamServer server;
  server.pos = reader.pos_of(table.source());
  bool ok = true;
  int64_t n = 0;
  if (const toml::node* node = table.get("weight")) {
    if (reader.read_int(*node, "upstream.server.weight", 1, 1000, &n)) {
      server.weight = static_cast<uint32_t>(n);
    } else {
      ok = false;
    }
  }
  if (const toml::node* node = table.get("backup")) {
    ok = reader.read_bool(*node, "upstream.server.backup", &server.backup) && ok;
  }
  if (const toml::node* node = table.get("max_conns")) {
    if (reader.read_int(*node, "upstream.server.max_conns", 0, kMaxConnsPerServer, &n)) {
      server.max_conns = static_cast<uint32_t>(n);
    } else {
      ok = false;
    }
  }
  if (const toml::node* node = table.get("route")) {
    // AJP's sticky sessions: the jvmRoute a session id ends with (".node1") picks this server.
    if (reader.read_string(*node, "upstream.server.route", &server.route, false) &&
        (server.route.find_first_of(" ;.,=\"") != std::string::npos ||
         has_control_chars(server.route))) {
      reader.error(node->source(), "invalid route \"" + server.route + "\"",
                   "the name of the Tomcat Engine's jvmRoute, e.g. route = \"node1\"");
      ok = false;
    }
  }
  const toml::node* address = table.get("address");
  if (address == nullptr) {
    reader.error(table.source(), "[[upstream.server]] has no 'address'",
                 "e.g. address = \"127.0.0.1:8080\" or \"unix:/run/app.sock\"");
    return;
  }
  std::string text, message, hint;
  if (!reader.read_string(*address, "upstream.server.address", &text)) return;
  if (!config::parse_upstream_address(text, &server, &message, &hint)) {
    reader.error(address->source(), message, hint);
    return;
  }
  server.pos = reader.pos_of(address->source());
  if (ok) add_server(reader, address->source(), std::move(server), group);
}

void read_health_check(Reader& reader, const toml::table& table, HealthCheck* check) {
  reader.check_keys(table, kHealthCheckKeys, "[upstream.health_check]");
  check->enabled = true;
  if (const toml::node* node = table.get("path")) {
    std::string path;
    if (reader.read_string(*node, "upstream.health_check.path", &path, false)) {
      if (path.front() != '/' || has_control_chars(path) || path.find(' ') != std::string::npos) {
        reader.error(node->source(), "invalid health check path \"" + path + "\"",
                     "a request target starting with '/', e.g. \"/health\"");
      } else {
        check->path = path;
      }
    }
  }
  if (const toml::node* node = table.get("host")) {
    std::string host;
    if (reader.read_string(*node, "upstream.health_check.host", &host, false)) {
      if (!config::detail::valid_host_header(host)) {
        reader.error(node->source(), "invalid health check host \"" + host + "\"",
                     "a Host header value such as \"app.internal\" or \"app.internal:8080\"");
      } else {
        check->host = host;
      }
    }
  }
  if (const toml::node* node = table.get("interval")) {
    reader.read_duration(*node, "upstream.health_check.interval", Millis(100), config::kMaxDuration,
                         &check->interval);
  }
  if (const toml::node* node = table.get("timeout")) {
    reader.read_duration(*node, "upstream.health_check.timeout", Millis(1), config::kMaxDuration,
                         &check->timeout);
  }
  if (const toml::node* node = table.get("status")) {
    int64_t lo = 0, hi = 0;
    constexpr std::string_view kName = "upstream.health_check.status";
    if (node->is_integer()) {
      if (reader.read_int(*node, kName, 100, 599, &lo)) {
        check->expect_status_min = check->expect_status_max = static_cast<int>(lo);
      }
    } else if (const auto* range = node->as_array(); range != nullptr && range->size() == 2) {
      if (reader.read_int(*range->get(0), kName, 100, 599, &lo) &&
          reader.read_int(*range->get(1), kName, 100, 599, &hi)) {
        if (lo > hi) {
          reader.error(node->source(),
                       "health check status range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "] is empty",
                       "write the lower status first, e.g. [200, 399]");
        } else {
          check->expect_status_min = static_cast<int>(lo);
          check->expect_status_max = static_cast<int>(hi);
        }
      }
    } else {
      reader.type_error(*node, kName, "a status or a [lowest, highest] range",
                        "e.g. status = 200 or status = [200, 399]");
    }
  }
  int64_t n = 0;
  if (const toml::node* node = table.get("rise")) {
    if (reader.read_int(*node, "upstream.health_check.rise", 1, 1000, &n))
      check->rise = static_cast<uint32_t>(n);
  }
  if (const toml::node* node = table.get("fall")) {
    if (reader.read_int(*node, "upstream.health_check.fall", 1, 1000, &n))
      check->fall = static_cast<uint32_t>(n);
  }
}

// `names`: the group names declared so far, with their first declaration.
void read_group(Reader& reader, const toml::table& table,
                std::map<std::string, config::SourcePos>* names, config::Config* config) {
  reader.check_keys(table, kGroupKeys, "[[upstream]]");
  UpstreamGroup group;
  group.pos = reader.pos_of(table.source());
  bool named = false;  // a usable, unique name: keep the group even with other errors, so
                       // that the routes naming it do not report it missing as well

  if (const toml::node* node = table.get("name")) {
    if (reader.read_string(*node, "upstream.name", &group.name, false)) {
      if (!config::is_group_name(group.name)) {
        reader.error(node->source(), "invalid upstream name \"" + group.name + "\"",
                     "names use letters, digits, '_', '.' and '-', e.g. \"app\" or \"php-fpm\"");
      } else if (auto [it, inserted] = names->emplace(group.name, group.pos); !inserted) {
        reader.error(node->source(), "upstream name '" + group.name + "' is used twice",
                     "first at line " + std::to_string(it->second.line));
      } else {
        named = true;
      }
    }
  } else {
    reader.error(table.source(), "[[upstream]] has no 'name'",
                 "routes refer to the group by name: name = \"app\"");
  }

  if (const toml::node* node = table.get("balance")) {
    std::string value;
    if (reader.read_string(*node, "upstream.balance", &value)) {
      if (value == "round_robin") {
        group.balance = config::Balance::kRoundRobin;
      } else if (value == "least_conn") {
        group.balance = config::Balance::kLeastConn;
      } else if (value == "ip_hash") {
        group.balance = config::Balance::kIpHash;
      } else if (value == "hash") {
        group.balance = config::Balance::kHash;
      } else {
        std::string suggestion = closest_match(value, kBalanceNames);
        reader.error(node->source(), "unknown balance \"" + value + "\"",
                     suggestion.empty() ? "one of: " + config::join(kBalanceNames)
                                        : "did you mean '" + suggestion + "'?");
      }
    }
  }
  if (const toml::node* hash_key = table.get("hash_key")) {
    std::string value;
    if (group.balance != config::Balance::kHash) {
      reader.error(hash_key->source(), "'hash_key' needs balance = \"hash\"",
                   "remove it, or set balance = \"hash\"");
    } else if (reader.read_string(*hash_key, "upstream.hash_key", &value, false)) {
      std::string problem = parse_hash_key(value, &group.hash_key);
      if (!problem.empty()) {
        reader.error(hash_key->source(), problem,
                     "hash_key is \"$uri\", \"$http_NAME\" (a request header) or \"$cookie_NAME\"");
      }
    }
  } else if (group.balance == config::Balance::kHash) {
    reader.error(table.get("balance")->source(), "balance = \"hash\" needs a 'hash_key'",
                 "e.g. hash_key = \"$uri\", \"$http_x_user_id\" or \"$cookie_session\"");
  }

  auto count = [&](std::string_view key, int64_t lo, int64_t hi, uint32_t* out) {
    int64_t n = 0;
    if (const toml::node* node = table.get(key)) {
      if (reader.read_int(*node, "upstream." + std::string(key), lo, hi, &n))
        *out = static_cast<uint32_t>(n);
    }
  };
  auto duration = [&](std::string_view key, Millis lo, Millis* out) {
    if (const toml::node* node = table.get(key)) {
      reader.read_duration(*node, "upstream." + std::string(key), lo, config::kMaxDuration, out);
    }
  };
  count("max_fails", 0, 1000, &group.max_fails);
  duration("fail_timeout", Millis(1), &group.fail_timeout);
  count("keepalive", 0, 65536, &group.keepalive);
  duration("keepalive_timeout", Millis(1), &group.keepalive_timeout);
  group.keepalive_written = table.contains("keepalive");
  group.keepalive_timeout_written = table.contains("keepalive_timeout");
  count("keepalive_requests", 1, UINT32_MAX, &group.keepalive_requests);
  count("queue", 0, kMaxQueue, &group.queue);
  duration("queue_timeout", Millis(1), &group.queue_timeout);
  duration("connect_timeout", Millis(1), &group.connect_timeout);
  duration("send_timeout", Millis(1), &group.send_timeout);
  duration("read_timeout", Millis(1), &group.read_timeout);
  count("tries", 1, 100, &group.tries);
  duration("try_timeout", Millis(0), &group.try_timeout);

  size_t errors_before = reader.error_count();
  const toml::node* servers = table.get("servers");
  if (servers != nullptr) {
    std::vector<std::pair<std::string, const toml::node*>> addresses;
    if (reader.read_string_list(*servers, "upstream.servers", &addresses)) {
      for (auto& [text, element] : addresses) {
        UpstreamServer server;
        server.pos = reader.pos_of(element->source());
        std::string message, hint;
        if (!config::parse_upstream_address(text, &server, &message, &hint)) {
          reader.error(element->source(), message, hint);
          continue;
        }
        add_server(reader, element->source(), std::move(server), &group);
      }
    }
  }
  const toml::node* server_tables = table.get("server");
  if (server_tables != nullptr) {
    const auto* array = server_tables->as_array();
    if (array != nullptr && array->is_array_of_tables()) {
      for (const toml::node& element : *array) read_server(reader, *element.as_table(), &group);
    } else {
      reader.type_error(*server_tables, "upstream.server", "an array of tables",
                        "write each server as an [[upstream.server]] table (double brackets), or "
                        "list addresses in servers = [\"...\"]");
    }
  }
  if (servers == nullptr && server_tables == nullptr) {
    reader.error(
        table.source(), "[[upstream]] has no servers",
        "add servers = [\"127.0.0.1:8080\"] or [[upstream.server]] tables with an address");
  } else if (reader.error_count() == errors_before && group.servers.empty()) {
    reader.error(servers != nullptr ? servers->source() : server_tables->source(),
                 "[[upstream]] has no servers", "list at least one address");
  } else if (reader.error_count() == errors_before && !group.servers.empty() &&
             std::all_of(group.servers.begin(), group.servers.end(),
                         [](const UpstreamServer& s) { return s.backup; })) {
    reader.error(group.pos, "every server of upstream '" + group.name + "' is a backup",
                 "backup servers are used only when no primary server is up; make at least one "
                 "server a primary (backup = false)");
  }

  if (const toml::node* node = table.get("health_check")) {
    if (const auto* health = node->as_table()) {
      read_health_check(reader, *health, &group.health_check);
    } else {
      reader.type_error(*node, "upstream.health_check", "a table",
                        "write an [upstream.health_check] section below the [[upstream]]");
    }
  }
  if (const toml::node* node = table.get("tls")) {
    reader.read_bool(*node, "upstream.tls", &group.tls.enabled);
    group.tls.pos = reader.pos_of(node->source());
  }
  if (group.tls.enabled) {
    for (const UpstreamServer& server : group.servers) {
      if (server.addr.ss_family == AF_UNIX)
        reader.error(server.pos, "upstream '" + group.name + "' has tls = true and a unix socket",
                     "TLS is for back ends reached over TCP; speak plain HTTP to '" +
                         server.address + "' in a group without tls");
    }
    read_tls_keys(reader, table, "upstream", group.name, &group.tls);
  } else {
    for (std::string_view key : kTlsKeys) {
      if (const toml::node* node = table.get(key))
        reader.error(node->source(), "'" + std::string(key) + "' needs tls = true",
                     "add tls = true to the [[upstream]] (its servers then speak https), or "
                     "remove '" +
                         std::string(key) + "'");
    }
  }
  if (named) config->upstreams.push_back(std::move(group));
}

}  // namespace

const std::vector<std::string_view>& group_keys() {
  return kGroupKeys;
}

const std::vector<std::string_view>& tls_keys() {
  return kTlsKeys;
}

bool read_tls_keys(Reader& reader, const toml::table& table, std::string_view prefix,
                   const std::string& default_name, config::UpstreamTls* tls) {
  const size_t errors_before = reader.error_count();
  const std::string dotted = std::string(prefix) + ".";
  auto path = [&](std::string_view key, std::string* out) -> const toml::node* {
    const toml::node* node = table.get(key);
    std::string value;
    if (node && reader.read_string(*node, dotted + std::string(key), &value, false))
      *out = config::detail::absolute_path(value, reader.base_dir());
    return node;
  };
  const toml::node* ca = path("tls_ca", &tls->ca_file);
  const toml::node* certificate = path("tls_certificate", &tls->certificate);
  const toml::node* key = path("tls_key", &tls->key);
  const toml::node* verify = table.get("tls_verify");
  if (verify) reader.read_bool(*verify, dotted + "tls_verify", &tls->verify);
  tls->server_name.clear();
  if (const toml::node* node = table.get("tls_server_name")) {
    std::string name;
    if (reader.read_string(*node, dotted + "tls_server_name", &name, false)) {
      const bool bracketed = name.front() == '[';
      if (!config::detail::valid_host_header(name) ||
          (bracketed ? name.back() != ']' : name.find(':') != std::string::npos)) {
        reader.error(node->source(), "invalid tls_server_name \"" + name + "\"",
                     "the name the back end's certificate shows, without a port: "
                     "\"app.internal\" or an IP address");
      } else {
        if (name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
        tls->server_name = name;
      }
    }
  }
  if (tls->server_name.empty()) tls->server_name = default_name;
  if (certificate && !key) {
    reader.error(
        certificate->source(), "'tls_certificate' needs a 'tls_key'",
        "the client certificate's private key, e.g. tls_key = \"/etc/peregrine/client.key\"");
  } else if (key && !certificate) {
    reader.error(key->source(), "'tls_key' needs a 'tls_certificate'",
                 "the client certificate chain the key belongs to");
  }
  if (ca && !tls->verify) {
    reader.error(ca->source(), "'tls_ca' is ignored with tls_verify = false",
                 "remove one of them: verification needs the CA, the CA needs verification");
  }
  if (reader.error_count() != errors_before) return false;
  // The files are read now, so that a missing or broken one is a config error with a position
  // rather than a failure of every request.
  tls::ClientOptions options;
  options.verify = tls->verify;
  options.ca_file = tls->ca_file;
  options.certificate = tls->certificate;
  options.key = tls->key;
  std::string problem;
  if (!tls::ClientContext::make(options, &problem)) {
    const toml::node* at = ca && problem.find("CA") != std::string::npos     ? ca
                           : key && problem.find("key") != std::string::npos ? key
                           : certificate                                     ? certificate
                                                                             : ca;
    if (at)
      reader.error(at->source(), problem, "a PEM file readable by the server's user");
    else
      reader.error(tls->pos, problem, "the system's CA store is /etc/ssl/certs (ca-certificates)");
    return false;
  }
  if (!tls->verify) {
    LOG_WARN(
        "%s:%u:%u: TLS to upstream '%s' does not verify the server's certificate "
        "(tls_verify = false): anyone on the path can read and change the traffic",
        reader.file().c_str(), verify->source().begin.line, verify->source().begin.column,
        default_name.c_str());
  }
  return true;
}

void read_groups(Reader& reader, const toml::node& node, config::Config* config) {
  const auto* array = node.as_array();
  if (array == nullptr || !(array->empty() || array->is_array_of_tables())) {
    reader.type_error(node, "upstream", "an array of tables",
                      "write each group as an [[upstream]] table (double brackets)");
    return;
  }
  std::map<std::string, config::SourcePos> names;
  for (const toml::node& element : *array) read_group(reader, *element.as_table(), &names, config);
}

// Header names are stored lower-case with '_' turned into '-' (as nginx spells
// $http_x_user_id); cookie names are case-sensitive and kept.
std::string parse_hash_key(std::string_view text, HashKey* out) {
  const std::string key(text);
  if (key == "$uri") {
    *out = HashKey{HashKey::Source::kUri, ""};
    return "";
  }
  auto name_ok = [](std::string_view name, bool header) {
    if (name.empty()) return false;
    return header ? config::detail::is_token(name)
                  : std::all_of(name.begin(), name.end(), [](char c) {
                      return static_cast<unsigned char>(c) > 0x20 && c != 0x7f && c != ';' &&
                             c != '=' && c != ',' && c != '"';
                    });
  };
  if (key.starts_with("$http_")) {
    std::string name = config::detail::to_lower(std::string_view(key).substr(6));
    if (!name_ok(name, true)) return "invalid header name in hash_key \"" + key + "\"";
    std::replace(name.begin(), name.end(), '_', '-');
    *out = HashKey{HashKey::Source::kHeader, std::move(name)};
    return "";
  }
  if (key.starts_with("$cookie_")) {
    std::string_view name = std::string_view(key).substr(8);
    if (!name_ok(name, false)) return "invalid cookie name in hash_key \"" + key + "\"";
    *out = HashKey{HashKey::Source::kCookie, std::string(name)};
    return "";
  }
  return "unknown hash_key \"" + key + "\"";
}

const UpstreamGroup* RouteGroups::find(std::string_view name) const {
  for (const UpstreamGroup& group : config_->upstreams) {
    if (group.name == name) return &group;
  }
  return nullptr;
}

std::string RouteGroups::resolve(Reader& reader, const toml::node& node,
                                 const config::UpstreamUse& use, const std::string& name,
                                 const std::string& address, const config::UpstreamTls* tls) {
  std::string group_name;
  if (!name.empty() && find(name) != nullptr) {
    group_name = name;
    const UpstreamGroup& group = *find(name);
    const bool https = tls != nullptr && tls->enabled;
    if (use.tls_by_scheme && https && !group.tls.enabled) {
      reader.error(
          node.source(),
          "proxy URL 'https://" + name + "' names upstream '" + name + "', which speaks plain HTTP",
          "add tls = true to the [[upstream]] at line " + std::to_string(group.pos.line) +
              ", or write \"http://" + name + "\"");
    } else if (use.tls_by_scheme && !https && group.tls.enabled) {
      reader.error(node.source(), "upstream '" + name + "' has tls = true",
                   "write \"https://" + name + "\": the scheme says how the back end is reached");
    } else if (!use.tls_by_scheme && group.tls.enabled) {
      reader.error(node.source(),
                   "upstream '" + name + "' has tls = true; " + std::string(use.display_name) +
                       " speaks plain",
                   "declare a group without tls for the " + std::string(use.protocol) + " route");
    }
  } else if (!address.empty()) {
    UpstreamServer server;
    std::string message, hint;
    if (!config::parse_upstream_address(address, &server, &message, &hint)) {
      reader.error(node.source(), message, hint);
      return "";
    }
    bool conflict = false;
    group_name =
        config::add_implicit_group(config_, server, reader.pos_of(node.source()), tls, &conflict);
    if (conflict)
      reader.error(node.source(),
                   "another route reaches '" + address + "' over https with other tls_* settings",
                   "declare one [[upstream]] with tls = true and its tls_* keys, and name it in "
                   "both routes");
  } else {
    std::vector<std::string_view> names;
    for (const UpstreamGroup& group : config_->upstreams) {
      if (group.name.find(':') == std::string::npos) names.push_back(group.name);
    }
    std::string suggestion = closest_match(name, names);
    std::string declared = config::declared_group_names(*config_);
    std::string hint = suggestion.empty() ? "" : "did you mean '" + suggestion + "'? ";
    hint += declared.empty() ? "no [[upstream]] group is declared" : "declared groups: " + declared;
    hint += use.address_hint;
    reader.error(node.source(), "no upstream group named '" + name + "'", hint);
    return "";
  }

  const UpstreamGroup* group = find(group_name);
  if (use.adapt != nullptr && group != nullptr) {
    for (UpstreamGroup& g : config_->upstreams)
      if (g.name == group_name) use.adapt(g);
  }
  if (!use.health_check && group != nullptr && group->health_check.enabled) {
    reader.error(node.source(),
                 "upstream '" + group_name + "' has a health_check, which probes over HTTP; a " +
                     std::string(use.protocol) + " route cannot use it",
                 "remove [upstream.health_check] from the group at line " +
                     std::to_string(group->pos.line) + " (passive health still applies)");
  }
  auto [it, inserted] = uses_.emplace(group_name, Use{&use, reader.pos_of(node.source())});
  if (!inserted && it->second.use->protocol != use.protocol) {
    // Named in the order of the handler set, whichever route came first.
    std::string_view first = it->second.use->protocol, second = use.protocol;
    if (config_->handlers.rank(second) < config_->handlers.rank(first)) std::swap(first, second);
    reader.error(node.source(),
                 "upstream '" + group_name + "' is used by both " + std::string(first) + " and " +
                     std::string(second) + " routes",
                 "first used by a " + std::string(it->second.use->protocol) + " route at line " +
                     std::to_string(it->second.pos.line) +
                     "; a group speaks one protocol, so declare one group for each");
  }
  return group_name;
}

}  // namespace peregrine::upstream
