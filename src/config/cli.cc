#include "config/cli.h"

#include <arpa/inet.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>

#include "admin/config.h"
#include "config/listen_address.h"
#include "config/php_fpm_pools.h"
#include "config/reader.h"
#include "config/registry.h"
#include "config/sections.h"
#include "config/upstream_address.h"
#include "config/validate.h"
#include "core/log.h"
#include "tls/config.h"
#include "upstream/config.h"

namespace peregrine::config {

namespace {

constexpr std::string_view kCommandLine = "<command line>";

enum class Option {
  kHelp,
  kVersion,
  kTest,
  kConfig,
  kListen,
  kRoot,
  kWorkers,
  kAccessLog,
  kPidFile,
  kErrorLog,
  kLogLevel,
  kEventBackend,
  kUser,
  kFastcgi,
  kProxy,
  kMaxBody,
  kFastcgiConns,
  kTlsCert,
  kTlsKey,
  kTlsSelfSigned,
  kCompress,
  kAjp,
  kAjpSecretFile,
  kAdmin,
  kRoute
};

struct OptionSpec {
  std::string_view name;  // long form, without "--"
  Option option;
  bool takes_value;
};

constexpr OptionSpec kLongOptions[] = {
    {"help", Option::kHelp, false},
    {"version", Option::kVersion, false},
    {"test", Option::kTest, false},
    {"config", Option::kConfig, true},
    {"listen", Option::kListen, true},
    {"root", Option::kRoot, true},
    {"workers", Option::kWorkers, true},
    {"access-log", Option::kAccessLog, true},
    {"pid-file", Option::kPidFile, true},
    {"error-log", Option::kErrorLog, true},
    {"log-level", Option::kLogLevel, true},
    {"event-backend", Option::kEventBackend, true},
    {"user", Option::kUser, true},
    {"fastcgi", Option::kFastcgi, true},
    {"proxy", Option::kProxy, true},
    {"max-body", Option::kMaxBody, true},
    {"fastcgi-conns", Option::kFastcgiConns, true},
    {"tls-cert", Option::kTlsCert, true},
    {"tls-key", Option::kTlsKey, true},
    {"tls-self-signed", Option::kTlsSelfSigned, false},
    {"compress", Option::kCompress, false},
    {"ajp", Option::kAjp, true},
    {"ajp-secret-file", Option::kAjpSecretFile, true},
    {"admin", Option::kAdmin, true},
    {"route", Option::kRoute, true},
};

const OptionSpec* find_long(std::string_view name) {
  for (const OptionSpec& spec : kLongOptions) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const OptionSpec* find_short(char c) {
  switch (c) {
    case 'h':
      return find_long("help");
    case 'v':
      return find_long("version");
    case 't':
      return find_long("test");
    case 'c':
      return find_long("config");
    default:
      return nullptr;
  }
}

// Stores one option; returns an error message or "".
std::string apply(Option option, std::string_view shown, const std::string& value,
                  CommandLine* cli) {
  if (value.empty() && option != Option::kHelp && option != Option::kVersion &&
      option != Option::kTest && option != Option::kTlsSelfSigned && option != Option::kCompress) {
    return "option '" + std::string(shown) + "' needs a non-empty value";
  }
  switch (option) {
    case Option::kHelp:
      cli->help = true;
      break;
    case Option::kVersion:
      cli->version = true;
      break;
    case Option::kTest:
      cli->test_only = true;
      break;
    case Option::kCompress:
      cli->compress = true;
      break;
    case Option::kConfig:
      cli->config_file = value;
      break;
    case Option::kAdmin:
      cli->admin = value;
      break;
    case Option::kListen:
      cli->listen.push_back(value);
      break;
    case Option::kRoot:
      cli->root = value;
      break;
    case Option::kAccessLog:
      cli->access_log = value;
      break;
    case Option::kPidFile:
      cli->pid_file = value;
      break;
    case Option::kErrorLog:
      cli->error_log = value;
      break;
    case Option::kUser:
      cli->user = value;
      break;
    case Option::kFastcgi:
      cli->fastcgi = value;
      break;
    case Option::kProxy:
      cli->proxy.push_back(value);
      break;
    case Option::kAjp:
      cli->ajp.push_back(value);
      break;
    case Option::kAjpSecretFile:
      cli->ajp_secret_file = value;
      break;
    case Option::kRoute:
      cli->routes.push_back(value);
      break;
    case Option::kMaxBody:
      cli->max_body = value;
      break;
    case Option::kFastcgiConns:
      cli->fastcgi_conns = value;
      break;
    case Option::kTlsCert:
      cli->tls_cert = value;
      break;
    case Option::kTlsKey:
      cli->tls_key = value;
      break;
    case Option::kTlsSelfSigned:
      cli->tls_self_signed = true;
      break;
    case Option::kWorkers: {
      if (value == "auto") {
        cli->workers = 0;
        break;
      }
      int n = 0;
      bool ok = value.size() <= 3 && value.find_first_not_of("0123456789") == std::string::npos;
      if (ok) n = std::stoi(value);
      if (!ok || n > 256) {
        return "invalid value '" + value + "' for --workers (expected \"auto\" or 1..256)";
      }
      cli->workers = n;  // 0 is "auto" too
      break;
    }
    case Option::kLogLevel: {
      LogLevel level;
      if (!detail::parse_log_level(value, &level)) {
        return "invalid value '" + value +
               "' for --log-level (expected debug, info, warn or error)";
      }
      cli->log_level = value;
      break;
    }
    case Option::kEventBackend: {
      EventBackend backend;
      if (!detail::parse_event_backend(value, &backend)) {
        return "invalid value '" + value +
               "' for --event-backend (expected epoll, io_uring or auto)";
      }
      cli->event_backend = value;
      break;
    }
  }
  return "";
}

std::string current_directory() {
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  return ec ? std::string("/") : cwd;
}

ConfigError cli_error(std::string message, std::string hint = {}) {
  return ConfigError{SourcePos{std::string(kCommandLine), 0, 0}, std::move(message),
                     std::move(hint)};
}

// The options that mean the same with or without a file.
void apply_common(const CommandLine& cli, const std::string& cwd, Config* config,
                  std::vector<ConfigError>* errors) {
  if (cli.workers >= 0) config->workers = cli.workers;
  if (!cli.pid_file.empty()) config->pid_file = detail::absolute_path(cli.pid_file, cwd);
  if (!cli.error_log.empty()) {
    if (cli.error_log == "stderr" || cli.error_log == "stdout") {
      config->error_log = cli.error_log;
    } else if (cli.error_log == "off") {
      errors->push_back(
          cli_error("--error-log cannot be 'off'", "use \"stderr\", \"stdout\" or a file path"));
    } else {
      config->error_log = detail::absolute_path(cli.error_log, cwd);
    }
  }
  if (!cli.log_level.empty() && !detail::parse_log_level(cli.log_level, &config->log_level)) {
    errors->push_back(cli_error("invalid --log-level '" + cli.log_level + "'",
                                "one of: debug, info, warn, error"));
  }
  if (!cli.event_backend.empty() &&
      !detail::parse_event_backend(cli.event_backend, &config->event_backend)) {
    errors->push_back(cli_error("invalid --event-backend '" + cli.event_backend + "'",
                                "one of: epoll, io_uring, auto"));
  }
  if (!cli.user.empty()) {
    if (detail::user_exists(cli.user)) {
      config->user = cli.user;
    } else {
      errors->push_back(cli_error("--user: user '" + cli.user + "' does not exist"));
    }
  }
  if (!cli.access_log.empty()) {
    for (Site& site : config->sites)
      detail::apply_access_log(cli.access_log, cwd, &site.access_log);
  }
}

// One route a --proxy option asks for, in file terms.
struct ProxyRoute {
  std::string prefix;
  std::string url;  // the proxy key's value
  bool strip_prefix = false;
};

// What the --proxy options ask for: prefix routes, and at most one route for every path.
struct QuickProxy {
  std::vector<ProxyRoute> prefix_routes;
  std::optional<ProxyRoute> catch_all;
};

// The back end of one --proxy URL. Checked here, before the route reader sees the URL, because
// on the command line a bare name cannot be a group. False after an error.
bool proxy_server(const std::string& url_text, ProxyUrl* url, UpstreamServer* server,
                  std::vector<ConfigError>* errors) {
  std::string message, hint;
  if (!parse_proxy_url(url_text, url, &message, &hint)) {
    errors->push_back(cli_error("--proxy: " + message, hint));
    return false;
  }
  std::string address = url->name.empty() ? url->address : url->default_port_address;
  if (address.empty()) {
    errors->push_back(cli_error("--proxy: '" + url_text + "' names the group '" + url->name +
                                    "', but groups are declared only in a configuration file",
                                "write the back end's address, e.g. http://127.0.0.1:8080, or "
                                "declare an [[upstream]] in a file (-c)"));
    return false;
  }
  if (!parse_upstream_address(address, server, &message, &hint)) {
    errors->push_back(cli_error("--proxy: " + message, hint));
    return false;
  }
  return true;
}

QuickProxy parse_proxy_options(const CommandLine& cli, Config* config,
                               std::vector<ConfigError>* errors) {
  QuickProxy out;
  const SourcePos here{std::string(kCommandLine), 0, 0};
  struct EveryPath {
    std::string text;
    ProxyUrl url;
    UpstreamServer server;
  };
  std::vector<EveryPath> every_path;  // --proxy URL
  for (const std::string& value : cli.proxy) {
    if (!value.starts_with('/')) {
      EveryPath target{value, {}, {}};
      if (proxy_server(value, &target.url, &target.server, errors)) {
        every_path.push_back(std::move(target));
      }
      continue;
    }
    size_t eq = value.find('=');
    if (eq == std::string::npos) {
      errors->push_back(cli_error("--proxy: '" + value + "' has a prefix but no URL",
                                  "write --proxy " + value + "=http://127.0.0.1:8080"));
      continue;
    }
    std::string prefix = value.substr(0, eq);
    if (detail::has_control_chars(prefix) || prefix.find_first_of(" *") != std::string::npos) {
      errors->push_back(cli_error("--proxy: invalid prefix '" + prefix + "'",
                                  "a path prefix such as /api/, without spaces or '*'"));
      continue;
    }
    bool duplicate = std::any_of(out.prefix_routes.begin(), out.prefix_routes.end(),
                                 [&](const ProxyRoute& r) { return r.prefix == prefix; });
    if (duplicate) {
      errors->push_back(cli_error("--proxy: prefix '" + prefix + "' is given twice"));
      continue;
    }
    ProxyUrl url;
    UpstreamServer server;
    if (!proxy_server(value.substr(eq + 1), &url, &server, errors)) continue;
    // A path in the URL replaces the prefix; without one, the prefix is stripped.
    out.prefix_routes.push_back(ProxyRoute{prefix, value.substr(eq + 1), url.path.empty()});
  }
  if (every_path.size() == 1) {
    out.catch_all = ProxyRoute{"/", every_path.front().text, false};
  } else if (every_path.size() > 1) {
    UpstreamGroup group;
    group.name = "proxy";  // cannot clash: implicit group names contain ':'
    group.pos = here;
    bool ok = true;
    for (EveryPath& target : every_path) {
      if (!target.url.path.empty()) {
        errors->push_back(cli_error("--proxy: several URLs form one group, so '" + target.url.path +
                                        "' cannot be added to one of them",
                                    "give the URLs without a path"));
        ok = false;
      }
      std::string name = canonical_upstream_address(target.server);
      for (const UpstreamServer& other : group.servers) {
        if (canonical_upstream_address(other) == name) {
          errors->push_back(cli_error("--proxy: back end " + name + " is given twice"));
          ok = false;
        }
      }
      target.server.pos = here;
      group.servers.push_back(target.server);
    }
    if (ok) {
      config->upstreams.push_back(std::move(group));
      out.catch_all = ProxyRoute{"/", "http://proxy", false};  // the group, by name
    }
  }
  return out;
}

// --ajp [/PREFIX/=]ajp://ADDR as route tables (prefix, ajp, the secret); *catch_all: the one
// without a prefix, if any. The route reader checks the address.
std::vector<toml::table> ajp_tables(const CommandLine& cli, std::optional<toml::table>* catch_all,
                                    std::vector<ConfigError>* errors) {
  std::vector<toml::table> out;
  if (!cli.ajp.empty() && cli.ajp_secret_file.empty()) {
    errors->push_back(cli_error("--ajp needs --ajp-secret-file FILE",
                                "FILE holds the secret of Tomcat's AJP connector (its "
                                "secret=\"...\"); --ajp-secret-file none sends none, for a "
                                "connector with secretRequired=\"false\""));
    return out;
  }
  if (cli.ajp.empty() && !cli.ajp_secret_file.empty()) {
    errors->push_back(cli_error("--ajp-secret-file needs --ajp"));
    return out;
  }
  for (const std::string& value : cli.ajp) {
    std::string prefix = "/", target = value;
    if (value.starts_with('/')) {
      size_t eq = value.find('=');
      if (eq == std::string::npos) {
        errors->push_back(cli_error("--ajp: '" + value + "' has a prefix but no address",
                                    "write --ajp " + value + "=ajp://127.0.0.1:8009"));
        continue;
      }
      prefix = value.substr(0, eq);
      target = value.substr(eq + 1);
      if (detail::has_control_chars(prefix) || prefix.find_first_of(" *") != std::string::npos) {
        errors->push_back(cli_error("--ajp: invalid prefix '" + prefix + "'",
                                    "a path prefix such as /app/, without spaces or '*'"));
        continue;
      }
    }
    if (!target.starts_with("ajp://")) {
      errors->push_back(cli_error("--ajp: '" + target + "' is not an ajp:// address",
                                  "e.g. --ajp /app/=ajp://127.0.0.1:8009"));
      continue;
    }
    toml::table table{{"prefix", prefix}, {"ajp", target}};
    if (cli.ajp_secret_file == "none")
      table.insert("ajp_secret_required", false);
    else
      table.insert("ajp_secret_file", cli.ajp_secret_file);
    if (prefix == "/") {
      if (catch_all->has_value())
        errors->push_back(cli_error("--ajp: only one address can serve every path",
                                    "give the others a prefix: --ajp /PREFIX/=ajp://..."));
      else
        *catch_all = std::move(table);
      continue;
    }
    out.push_back(std::move(table));
  }
  return out;
}

toml::table proxy_table(const ProxyRoute& route) {
  toml::table table{{"prefix", route.prefix}, {"proxy", route.url}};
  if (route.strip_prefix) table.insert("strip_prefix", true);
  return table;
}

// Reads a route the options describe with the reader of a file's [[site.route]], so that quick
// mode has the file's defaults and checks. Its errors name `option` ("--fastcgi"), if any.
bool read_quick_route(std::string_view option, const toml::table& table, const Site& site,
                      const std::string& cwd, const HandlerSet& handlers,
                      upstream::RouteGroups& groups, Route* route,
                      std::vector<ConfigError>* errors) {
  Reader reader(std::string(kCommandLine), cwd);
  reader.set_handlers(&handlers);
  RouteContext context{reader, site, groups};
  bool ok = read_route(context, table, route);
  for (ConfigError& e : reader.take_errors()) {
    if (!option.empty()) e.message = std::string(option) + ": " + e.message;
    // A place inside the option's own text ("route = {...}" for --route) would only mislead.
    e.pos.line = e.pos.column = 0;
    errors->push_back(std::move(e));
  }
  return ok;
}

// --route 'KEYS': the keys of one [[site.route]], as an inline table's inside.
std::optional<toml::table> route_table(const std::string& keys, std::vector<ConfigError>* errors) {
  try {
    toml::table document = toml::parse("route = {" + keys + "}", std::string_view(kCommandLine));
    if (toml::table* table = document["route"].as_table()) return std::move(*table);
  } catch (const toml::parse_error& e) {
    errors->push_back(
        cli_error("--route '" + keys + "': TOML syntax error: " + std::string(e.description()),
                  "write the keys of one [[site.route]] separated by commas, e.g. "
                  "--route 'prefix = \"/hi/\", return = 200, body = \"hi\"'"));
  }
  return std::nullopt;
}

constexpr std::string_view kQuickFastcgiGroup = "php";  // implicit group names contain ':'

// --fastcgi ADDR becomes a one-server group with a cap on connections: --fastcgi-conns, else
// the pm.max_children of the running php-fpm pool listening on ADDR, else a safe default. With
// a cap the connections are kept (FCGI_KEEP_CONN) and requests beyond it queue here instead of
// each opening a connection that waits in php-fpm's backlog.
bool add_quick_fastcgi_group(const CommandLine& cli, bool have_root, Config* config,
                             std::vector<ConfigError>* errors) {
  UpstreamServer server;
  std::string message, hint;
  // On the command line the value is always an address (no group is declared): report it as
  // one rather than as an unknown group name.
  if (!parse_upstream_address(cli.fastcgi, &server, &message, &hint)) {
    errors->push_back(cli_error("--fastcgi: " + message, hint));
    return false;
  }
  if (!have_root) return false;  // an error already; no cap to find or report
  server.pos = SourcePos{std::string(kCommandLine), 0, 0};
  if (!cli.fastcgi_conns.empty()) {
    uint32_t n = 0;
    auto [end, ec] = std::from_chars(cli.fastcgi_conns.data(),
                                     cli.fastcgi_conns.data() + cli.fastcgi_conns.size(), n);
    if (ec != std::errc() || end != cli.fastcgi_conns.data() + cli.fastcgi_conns.size() || n < 1 ||
        n > 100000) {
      errors->push_back(
          cli_error("--fastcgi-conns: '" + cli.fastcgi_conns + "' is not a number of connections",
                    "1..100000, e.g. php-fpm's pm.max_children"));
      return false;
    }
    server.max_conns = n;
  } else if (std::optional<FpmLimit> found = find_fpm_limit(server)) {
    server.max_conns = found->max_children;
    LOG_INFO(
        "--fastcgi %s: at most %u connections, the pm.max_children of php-fpm pool [%s] "
        "in %s (--fastcgi-conns N to change it)",
        cli.fastcgi.c_str(), found->max_children, found->pool.c_str(), found->file.c_str());
  } else {
    server.max_conns = kQuickFastcgiDefaultConns;
    LOG_INFO(
        "--fastcgi %s: at most %u connections (no running php-fpm pool listens there to "
        "say its pm.max_children; --fastcgi-conns N to change it)",
        cli.fastcgi.c_str(), kQuickFastcgiDefaultConns);
  }
  UpstreamGroup group;
  group.name = std::string(kQuickFastcgiGroup);
  group.pos = server.pos;
  group.servers.push_back(std::move(server));
  config->upstreams.push_back(std::move(group));
  return true;
}

// --max-body, or the default for the kind of site, read as the file's max_body_bytes.
void read_max_body(const CommandLine& cli, const std::string& cwd, Limits* limits,
                   std::vector<ConfigError>* errors) {
  std::string value = cli.max_body;
  if (value.empty() && !cli.fastcgi.empty()) value = std::string(kQuickFastcgiMaxBody);
  if (value.empty()) return;
  Reader reader(std::string(kCommandLine), cwd);
  read_limits(reader, toml::table{{"max_body_bytes", value}}, limits);
  for (ConfigError& e : reader.take_errors()) {
    e.message = "--max-body: " + e.message;
    errors->push_back(std::move(e));
  }
}

struct SelfSigned {
  TlsCertificate certificate;
  std::string fingerprint;
};
SelfSigned& self_signed() {
  static SelfSigned made;
  return made;
}

// --admin ADDR: the admin listener, with a token made now and printed once (there is no file
// to read one from).
void apply_quick_admin(const CommandLine& cli, const std::string& cwd, Config* config,
                       std::vector<ConfigError>* errors) {
  if (cli.admin.empty()) return;
  const std::string token = admin::random_token();
  if (token.empty()) {
    errors->push_back(cli_error("--admin: no random token could be made (OpenSSL's RAND_bytes)"));
    return;
  }
  Reader reader(std::string(kCommandLine), cwd);
  admin::read_admin(reader, toml::table{{"listen", cli.admin}}, config, token);
  for (ConfigError& e : reader.take_errors()) {
    e.message = "--admin: " + e.message;
    errors->push_back(std::move(e));
  }
  if (config->admin.enabled)
    std::fprintf(stderr, "admin API token (shown once; send it as Authorization: Bearer): %s\n",
                 token.c_str());
}

// --tls-cert/--tls-key/--tls-self-signed: every listener serves TLS with that certificate.
void apply_quick_tls(const CommandLine& cli, const std::string& cwd, Config* config, Site* site,
                     std::vector<ConfigError>* errors) {
  const bool files = !cli.tls_cert.empty() || !cli.tls_key.empty();
  if (!files && !cli.tls_self_signed) return;
  if (files && cli.tls_self_signed) {
    errors->push_back(cli_error("--tls-self-signed cannot be combined with --tls-cert/--tls-key",
                                "use either your certificate or a generated one"));
    return;
  }
  for (ListenAddress& address : config->listen) {
    address.tls = true;
    address.http2 = true;
  }
  if (files) {
    if (cli.tls_cert.empty() || cli.tls_key.empty()) {
      errors->push_back(cli_error(
          cli.tls_cert.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key",
          "give both: --tls-cert CERT.pem --tls-key KEY.pem"));
      return;
    }
    Reader reader(std::string(kCommandLine), cwd);
    toml::table table{{"certificate", cli.tls_cert}, {"key", cli.tls_key}};
    tls::read_site_tls(reader, table, &site->tls);
    for (ConfigError& e : reader.take_errors()) {
      e.message = "--tls-cert/--tls-key: " + e.message;
      errors->push_back(std::move(e));
    }
    return;
  }
  SelfSigned& made = self_signed();
  if (made.fingerprint.empty()) {
    std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
    for (const ListenAddress& address : config->listen) {
      char text[INET6_ADDRSTRLEN] = "";
      if (address.addr.ss_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address.addr).sin_addr, text,
                  sizeof text);
      } else if (address.addr.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address.addr).sin6_addr, text,
                  sizeof text);
      }
      std::string name = text;
      if (!name.empty() && name != "0.0.0.0" && name != "::" &&
          std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(name);
    }
    std::string problem = tls::make_self_signed(names, &made.certificate, &made.fingerprint);
    if (!problem.empty()) {
      errors->push_back(cli_error("--tls-self-signed: " + problem));
      return;
    }
  }
  site->tls.certificates.push_back(made.certificate);
}

constexpr std::string_view kWelcomePage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Peregrine is running</title>
<style>
  body { font: 17px/1.6 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2933;
         background: #f7f7f2; max-width: 38rem; margin: 5rem auto; padding: 0 1.25rem; }
  h1 { font-weight: 650; letter-spacing: -0.01em; margin-bottom: 0.25rem; }
  .lead { color: #52606d; margin-top: 0; }
  pre { background: #1f2933; color: #f5f7fa; padding: 0.8rem 1rem; border-radius: 6px;
        overflow-x: auto; }
  code { font: 0.92em ui-monospace, "SFMono-Regular", Menlo, monospace; }
  p code { background: #e4e7eb; padding: 0.1em 0.35em; border-radius: 4px; }
</style>
</head>
<body>
<h1>Peregrine is running</h1>
<p class="lead">This welcome page is built in: the server has no site to serve yet.</p>
<p>Serve a directory of files:</p>
<pre><code>peregrine --root /path/to/site</code></pre>
<p>or put them in <code>./www</code> and start Peregrine from that directory. For several
sites, redirects and the rest, write a configuration file:</p>
<pre><code>peregrine -c /etc/peregrine/peregrine.toml</code></pre>
<p>Check a configuration without starting the server with <code>peregrine -t -c FILE</code>.</p>
</body>
</html>
)html";

}  // namespace

CommandLineResult parse_command_line(int argc, const char* const* argv) {
  CommandLineResult result;
  CommandLine& cli = result.cli;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i] != nullptr ? argv[i] : "";
    const OptionSpec* spec = nullptr;
    std::string shown;
    std::string value;
    bool has_inline_value = false;

    if (arg.starts_with("--") && arg.size() > 2) {
      std::string_view name = arg.substr(2);
      if (size_t eq = name.find('='); eq != std::string_view::npos) {
        value = std::string(name.substr(eq + 1));
        name = name.substr(0, eq);
        has_inline_value = true;
      }
      shown = "--" + std::string(name);
      spec = find_long(name);
      if (spec == nullptr) {
        std::vector<std::string_view> names;
        for (const OptionSpec& s : kLongOptions) names.push_back(s.name);
        std::string suggestion = detail::closest_match(name, names);
        result.error = "unknown option '" + shown + "'";
        if (!suggestion.empty()) result.error += " (did you mean '--" + suggestion + "'?)";
        return result;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      shown = std::string(arg.substr(0, 2));
      spec = find_short(arg[1]);
      if (spec == nullptr) {
        result.error = "unknown option '" + shown + "'";
        return result;
      }
      if (arg.size() > 2) {
        if (!spec->takes_value) {
          result.error = "unexpected text after '" + shown + "' in '" + std::string(arg) + "'";
          return result;
        }
        value = std::string(arg.substr(2));  // "-cFILE"
        has_inline_value = true;
      }
    } else {
      result.error = "unexpected argument '" + std::string(arg) + "'";
      if (arg == "--") result.error = "unexpected '--': peregrine takes no file arguments";
      return result;
    }

    if (!spec->takes_value && has_inline_value) {
      result.error = "option '" + shown + "' takes no value";
      return result;
    }
    if (spec->takes_value && !has_inline_value) {
      if (i + 1 >= argc || argv[i + 1] == nullptr) {
        result.error = "option '" + shown + "' needs a value";
        return result;
      }
      value = argv[++i];
    }
    result.error = apply(spec->option, shown, value, &cli);
    if (!result.error.empty()) return result;
  }
  return result;
}

std::string usage() {
  return R"(Usage: peregrine [options]

  -c, --config FILE        load the configuration from FILE (TOML)
  -t, --test               check the configuration, print the result and exit
      --listen ADDR        listen on ADDR; repeatable (default 127.0.0.1:8080)
                           forms: 8080  *:80  :80  127.0.0.1:8080  [::1]:8080  localhost:8080
      --root DIR           serve the files under DIR (default ./www, else a welcome page)
      --workers N|auto     worker threads, 1..256 (default auto: one per core)
      --access-log off|stdout|stderr|PATH
                           access log, combined format (default stdout)
      --pid-file PATH      write the process id to PATH
      --error-log stderr|stdout|PATH
      --log-level debug|info|warn|error
      --event-backend epoll|io_uring|auto
                           how workers wait for sockets (default epoll); auto: io_uring where
                           the kernel allows it, else epoll
      --user NAME          drop privileges to NAME after binding (when started as root)
      --fastcgi ADDR       run PHP: send requests for --root DIR to the FastCGI server ADDR
                           (unix:/run/php/php8.2-fpm.sock or 127.0.0.1:9000); *.php runs there,
                           other files are served, other paths go to /index.php
      --proxy URL          proxy every request to URL (http://127.0.0.1:8080,
                           http://unix:/run/app.sock:); repeat it to balance over several
      --proxy /PREFIX/=URL proxy paths under /PREFIX/ (prefix stripped) to URL; repeatable;
                           --root (or the defaults) serves the rest
      --ajp ajp://ADDR     send every request to Tomcat's AJP connector at ADDR
                           (ajp://127.0.0.1:8009)
      --ajp /PREFIX/=ajp://ADDR
                           send paths under /PREFIX/ (kept) to the AJP connector; repeatable
      --ajp-secret-file FILE|none
                           the AJP connector's secret (its secret="..."), needed with --ajp;
                           none: send no secret (secretRequired="false")
      --route 'KEYS'       one route, written as the keys of a [[site.route]] in a file
                           (--route 'prefix = "/old/", return = 301, location = "/new/"');
                           repeatable, before the routes the other options make
      --fastcgi-conns N    at most N connections to --fastcgi ADDR, kept open between requests;
                           more requests wait for one (default: the pm.max_children of the
                           running php-fpm pool listening on ADDR, else 5)
      --tls-cert PEM --tls-key PEM
                           serve TLS (HTTPS) on every --listen address with this certificate
                           chain and key
      --tls-self-signed    serve TLS with a certificate made in memory for localhost and the
                           listen addresses (ECDSA P-256); prints its SHA-256 fingerprint
      --max-body SIZE      largest request body, e.g. 1m, 64m (as max_body_bytes in a file);
                           larger ones get 413. Default 1m, and 64m with --fastcgi, so that
                           WordPress uploads reach PHP and php.ini's post_max_size and
                           upload_max_filesize decide (guides raise them to 64M)
      --compress           compress responses on the fly (br, zstd, gzip) with the defaults
                           of compress = true in a file
      --admin ADDR         serve the admin API (/metrics, /api/stats, /api/status) on ADDR
                           (127.0.0.1:9090 or unix:/path); a random token is printed once
  -h, --help               show this help and exit
  -v, --version            show the version and exit

Options take "--opt value" or "--opt=value". Without -c, Peregrine serves one site built
from these options. With -c FILE, --workers, --pid-file, --error-log, --log-level, --user,
--event-backend and --access-log override the file; --listen, --root, --fastcgi, --fastcgi-conns, --proxy,
--route and --max-body belong in the file.

Signals: TERM/INT stop now, QUIT stops gracefully, HUP reloads the configuration,
USR1 reopens the log files, USR2 upgrades to the binary on disk without closing the sockets.
)";
}

LoadResult build_config(const CommandLine& cli, const HandlerSet& handlers) {
  LoadResult result;
  try {
    const std::string cwd = current_directory();

    if (!cli.config_file.empty()) {
      if (!cli.listen.empty()) {
        result.errors.push_back(cli_error("--listen cannot be combined with -c",
                                          "set listen = [...] in " + cli.config_file));
      }
      if (!cli.root.empty()) {
        result.errors.push_back(cli_error("--root cannot be combined with -c",
                                          "set root in a [[site]] of " + cli.config_file));
      }
      if (!cli.fastcgi.empty()) {
        result.errors.push_back(cli_error("--fastcgi cannot be combined with -c",
                                          "add a route with fastcgi = \"" + cli.fastcgi +
                                              "\" to a [[site]] of " + cli.config_file));
      }
      if (!cli.fastcgi_conns.empty()) {
        result.errors.push_back(cli_error("--fastcgi-conns cannot be combined with -c",
                                          "set max_conns = " + cli.fastcgi_conns +
                                              " on the server of an [[upstream]] group in " +
                                              cli.config_file));
      }
      if (!cli.ajp.empty() || !cli.ajp_secret_file.empty()) {
        result.errors.push_back(
            cli_error("--ajp and --ajp-secret-file cannot be combined with -c",
                      "add a route with ajp = \"ajp://...\" to a [[site]] of " + cli.config_file));
      }
      if (!cli.routes.empty()) {
        result.errors.push_back(
            cli_error("--route cannot be combined with -c",
                      "add a [[site.route]] with those keys to a [[site]] of " + cli.config_file));
      }
      if (!cli.proxy.empty()) {
        result.errors.push_back(
            cli_error("--proxy cannot be combined with -c",
                      "add a route with proxy = \"URL\" to a [[site]] of " + cli.config_file));
      }
      if (!cli.tls_cert.empty() || !cli.tls_key.empty() || cli.tls_self_signed) {
        result.errors.push_back(
            cli_error("--tls-cert, --tls-key and --tls-self-signed cannot be combined with -c",
                      "set listen = { address = \"...\", tls = true } and a site's tls = "
                      "{ certificate = \"...\", key = \"...\" } in " +
                          cli.config_file));
      }
      if (cli.compress) {
        result.errors.push_back(
            cli_error("--compress cannot be combined with -c",
                      "set compress = true in a [[site]] of " + cli.config_file));
      }
      if (!cli.admin.empty()) {
        result.errors.push_back(cli_error(
            "--admin cannot be combined with -c",
            "add [admin] listen = \"" + cli.admin + "\" and token_file to " + cli.config_file));
      }
      if (!cli.max_body.empty()) {
        result.errors.push_back(cli_error(
            "--max-body cannot be combined with -c",
            "set max_body_bytes = \"" + cli.max_body + "\" in [limits] of " + cli.config_file));
      }
      if (!result.errors.empty()) return result;
      LoadResult loaded = load_file(cli.config_file, handlers);
      if (!loaded.errors.empty()) return loaded;
      result.warnings = std::move(loaded.warnings);
      auto config = std::make_shared<Config>(*loaded.config);
      apply_common(cli, cwd, config.get(), &result.errors);
      if (result.errors.empty()) result.config = std::move(config);
      return result;
    }

    // Quick mode.
    auto config = std::make_shared<Config>();
    config->source = std::string(kCommandLine);
    config->handlers = handlers;
    const SourcePos here{std::string(kCommandLine), 0, 0};
    std::vector<std::string> listen = cli.listen;
    if (listen.empty()) listen.push_back("127.0.0.1:8080");
    for (const std::string& text : listen) {
      ListenAddress address;
      std::string message, hint;
      if (!parse_listen_address(text, &address, &message, &hint)) {
        result.errors.push_back(cli_error("--listen: " + message, hint));
        continue;
      }
      address.pos = here;
      bool duplicate = false;
      for (const ListenAddress& other : config->listen) {
        if (endpoint_port(address.addr) != 0 && same_endpoint(other.addr, address.addr))
          duplicate = true;
      }
      if (duplicate) {
        result.errors.push_back(cli_error("--listen: duplicate listen address '" + text + "'"));
        continue;
      }
      config->listen.push_back(std::move(address));
    }

    read_max_body(cli, cwd, &config->limits, &result.errors);

    Site site;
    site.is_default = true;
    site.pos = here;
    site.access_log = AccessLog{AccessLogFormat::kCombined, "stdout", {}};
    site.compress.enabled = cli.compress;  // --compress: gzip, brotli and zstd with the defaults

    QuickProxy proxy = parse_proxy_options(cli, config.get(), &result.errors);
    std::optional<toml::table> ajp_catch_all;
    std::vector<toml::table> ajp_routes = ajp_tables(cli, &ajp_catch_all, &result.errors);
    if (ajp_catch_all && (proxy.catch_all || !cli.fastcgi.empty() || !cli.root.empty())) {
      result.errors.push_back(
          cli_error("--ajp without a prefix serves every path: --proxy URL, --fastcgi and "
                    "--root would serve none",
                    "send one prefix to Tomcat with --ajp /PREFIX/=ajp://ADDR"));
    }
    if (proxy.catch_all && !cli.fastcgi.empty()) {
      result.errors.push_back(
          cli_error("--proxy URL and --fastcgi cannot both serve every path",
                    "proxy one prefix beside the PHP site with --proxy /PREFIX/=URL"));
    }
    if (proxy.catch_all && !cli.root.empty()) {
      result.errors.push_back(
          cli_error("--root is not used: a --proxy URL without a prefix proxies every path",
                    "to serve --root and proxy one prefix, write --proxy /PREFIX/=URL"));
    }

    std::string root, problem;
    std::error_code ec;
    if (!cli.root.empty()) {
      if (!detail::resolve_directory(cli.root, cwd, &root, &problem)) {
        result.errors.push_back(cli_error("--root '" + cli.root + "' " + problem));
      }
    } else if (!cli.fastcgi.empty()) {
      result.errors.push_back(cli_error("--fastcgi needs --root DIR",
                                        "DIR is the directory of the PHP scripts, as php-fpm sees "
                                        "it (SCRIPT_FILENAME is DIR followed by the path)"));
    } else if (!proxy.catch_all && !ajp_catch_all &&
               std::filesystem::is_directory(std::filesystem::path(cwd) / "www", ec)) {
      detail::resolve_directory("www", cwd, &root, &problem);
    }
    site.static_files.root = root;

    if (!cli.fastcgi_conns.empty() && cli.fastcgi.empty()) {
      result.errors.push_back(cli_error("--fastcgi-conns needs --fastcgi ADDR"));
    }
    const bool fastcgi_group =
        !cli.fastcgi.empty() && !proxy.catch_all &&
        add_quick_fastcgi_group(cli, !root.empty(), config.get(), &result.errors);
    upstream::RouteGroups groups(config.get());
    auto add_route = [&](std::string_view option, const toml::table& table) {
      Route route;
      if (read_quick_route(option, table, site, cwd, config->handlers, groups, &route,
                           &result.errors)) {
        site.routes.push_back(std::move(route));
      }
    };
    for (const std::string& keys : cli.routes) {
      if (std::optional<toml::table> table = route_table(keys, &result.errors))
        add_route("--route", *table);
    }
    for (const ProxyRoute& prefix_route : proxy.prefix_routes) {
      add_route("--proxy", proxy_table(prefix_route));
    }
    for (const toml::table& table : ajp_routes) add_route("--ajp", table);
    if (ajp_catch_all) {
      add_route("--ajp", *ajp_catch_all);
    } else if (proxy.catch_all) {
      add_route("--proxy", proxy_table(*proxy.catch_all));
    } else if (fastcgi_group) {
      add_route("--fastcgi",
                toml::table{{"prefix", "/"},
                            {"fastcgi", std::string(kQuickFastcgiGroup)},
                            {"index", toml::array{"index.php", "index.html"}},
                            {"try_files", toml::array{"$uri", "$uri/", "/index.php?$args"}}});
    } else if (!root.empty()) {
      add_route("", toml::table{{"prefix", "/"}});
    } else {
      add_route("", toml::table{{"prefix", "/"},
                                {"return", 200},
                                {"content_type", "text/html; charset=utf-8"},
                                {"body", kWelcomePage}});
    }
    apply_quick_tls(cli, cwd, config.get(), &site, &result.errors);
    apply_quick_admin(cli, cwd, config.get(), &result.errors);
    config->sites.push_back(std::move(site));
    config->default_site = 0;

    apply_common(cli, cwd, config.get(), &result.errors);
    if (result.errors.empty()) result.config = std::move(config);
  } catch (const std::exception& e) {
    result.config.reset();
    result.errors.push_back(cli_error(std::string("internal error: ") + e.what()));
  }
  return result;
}

std::string self_signed_fingerprint() {
  return self_signed().fingerprint;
}

}  // namespace peregrine::config
