// The TOML loader: valid configurations of each scenario, and each class of error with its
// exact line:col, message and hint. A handler's own route keys are tested beside it
// (tests/unit/handlers/NAME/config_test.cc), upstream groups in tests/unit/upstream/.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/listen_address.h"
#include "unit/config/config_test_support.h"

namespace peregrine::config {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;

class LoadTest : public test_support::ConfigTest {};

// ---------------------------------------------------------------- valid configurations

TEST_F(LoadTest, MinimalSiteGetsEveryDefault) {
  auto config = load_ok(R"([[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->source, dir_.path("test.toml"));
  ASSERT_EQ(config->listen.size(), 1u);
  EXPECT_EQ(config->listen[0].text, "127.0.0.1:8080");
  EXPECT_EQ(format_endpoint(config->listen[0].addr), "127.0.0.1:8080");
  EXPECT_EQ(config->listen[0].backlog, 4096);
  EXPECT_EQ(config->workers, 0);
  EXPECT_EQ(config->user, "");
  EXPECT_EQ(config->pid_file, "");
  EXPECT_EQ(config->error_log, "stderr");
  EXPECT_EQ(config->log_level, LogLevel::kInfo);
  EXPECT_EQ(config->server_header, "peregrine");
  EXPECT_EQ(config->limits.header_timeout, Millis(20'000));
  EXPECT_EQ(config->limits.keepalive_timeout, Millis(75'000));
  EXPECT_EQ(config->limits.max_header_bytes, 16384u);
  EXPECT_EQ(config->limits.max_body_bytes, 1u << 20);
  EXPECT_EQ(config->limits.max_requests_per_connection, 1000u);
  EXPECT_TRUE(config->mime_types.empty());

  ASSERT_EQ(config->sites.size(), 1u);
  const Site& site = config->sites[0];
  EXPECT_TRUE(site.hosts.empty());
  EXPECT_TRUE(site.is_default);
  EXPECT_EQ(config->default_site, 0u);
  EXPECT_EQ(site.static_files.root, www());
  EXPECT_EQ(site.access_log.format, AccessLogFormat::kCombined);
  EXPECT_EQ(site.access_log.path, "stdout");
  EXPECT_EQ(site.pos.line, 1u);

  // No routes: one implicit static route for everything.
  ASSERT_EQ(site.routes.size(), 1u);
  const Route& route = site.routes[0];
  EXPECT_EQ(route.match, MatchKind::kPrefix);
  EXPECT_EQ(route.pattern, "/");
  EXPECT_EQ(route.type->name, "static");
  EXPECT_EQ(route.static_files.root, www());
  EXPECT_EQ(route.static_files.index, std::vector<std::string>{"index.html"});
  EXPECT_FALSE(route.static_files.directory_listing);
  EXPECT_TRUE(route.static_files.precompressed);
  EXPECT_TRUE(route.static_files.etag);
  EXPECT_EQ(route.static_files.cache_valid, Millis(1000));
}

TEST_F(LoadTest, StaticSiteWithIndexErrorPagesAndListing) {
  auto config = load_ok(R"(listen = "*:80"
workers = 4
server_header = ""

[[site]]
root = "www"
index = ["index.html", "index.htm"]
error_pages = { 404 = "/errors/404.html", 500 = "/errors/50x.html" }

[[site.route]]
prefix = "/downloads/"
directory_listing = true

[[site.route]]
prefix = "/"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->workers, 4);
  EXPECT_EQ(config->server_header, "");
  EXPECT_EQ(format_endpoint(config->listen[0].addr), "0.0.0.0:80");
  const Site& site = config->sites[0];
  EXPECT_EQ(site.error_pages.at(404), "/errors/404.html");
  EXPECT_EQ(site.error_pages.at(500), "/errors/50x.html");
  ASSERT_EQ(site.routes.size(), 2u);
  EXPECT_EQ(site.routes[0].pattern, "/downloads/");
  EXPECT_TRUE(site.routes[0].static_files.directory_listing);
  EXPECT_EQ(site.routes[0].static_files.index,
            (std::vector<std::string>{"index.html", "index.htm"}));
  EXPECT_FALSE(site.routes[1].static_files.directory_listing);
  EXPECT_EQ(site.routes[1].static_files.root, www());
  EXPECT_EQ(site.routes[0].pos.line, 10u);
  EXPECT_EQ(site.routes[0].pos.column, 1u);
}

TEST_F(LoadTest, SiteWithRootServesUnmatchedPathsThroughAnImplicitLastRoute) {
  auto config = load_ok(R"([[site]]
root = "www"

[[site.route]]
exact = "/hello"
return = 200
body = "hi"
)");
  ASSERT_NE(config, nullptr);
  const Site& site = config->sites[0];
  ASSERT_EQ(site.routes.size(), 2u);
  EXPECT_EQ(site.routes[0].type->name, "return");
  EXPECT_EQ(site.routes[1].match, MatchKind::kPrefix);
  EXPECT_EQ(site.routes[1].pattern, "/");
  EXPECT_EQ(site.routes[1].type->name, "static");
  EXPECT_EQ(site.routes[1].static_files.root, www());
}

TEST_F(LoadTest, SeveralSitesByHost) {
  auto config = load_ok(R"([[site]]
hosts = ["Example.COM", "*.example.com"]
root = "www"

[[site]]
hosts = "other.org."
root = "www/static"
default = true
access_log = "off"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->sites.size(), 2u);
  EXPECT_EQ(config->sites[0].hosts, (std::vector<std::string>{"example.com", "*.example.com"}));
  EXPECT_EQ(config->sites[1].hosts, std::vector<std::string>{"other.org"});
  EXPECT_EQ(config->default_site, 1u);
  EXPECT_FALSE(config->sites[0].is_default);
  EXPECT_TRUE(config->sites[1].is_default);
  EXPECT_EQ(config->sites[1].access_log.format, AccessLogFormat::kOff);
}

TEST_F(LoadTest, IpLiteralHosts) {
  auto config = load_ok(R"([[site]]
hosts = ["127.0.0.1", "[::1]", "localhost"]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].hosts, (std::vector<std::string>{"127.0.0.1", "[::1]", "localhost"}));
  EXPECT_EQ(error("[[site]]\nhosts = [\"[::1]:80\"]\nroot = \"www\"\n"),
            "2:10: ports are not allowed in host names ('[::1]:80') (hint: the port of the Host "
            "header is ignored when choosing a site; write '[::1]')");
  EXPECT_EQ(error("[[site]]\nhosts = [\"[zz]\"]\nroot = \"www\"\n"),
            "2:10: invalid host name '[zz]' (hint: IPv6 literals are written in brackets, e.g. "
            "'[::1]')");
}

TEST_F(LoadTest, FirstSiteIsTheDefaultWhenNoneIsMarked) {
  auto config = load_ok(R"([[site]]
hosts = ["a.com"]
root = "www"
[[site]]
hosts = ["b.com"]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->default_site, 0u);
  EXPECT_TRUE(config->sites[0].is_default);
  EXPECT_FALSE(config->sites[1].is_default);
}

TEST_F(LoadTest, SiteWithoutHostsIsTheCatchAll) {
  auto config = load_ok(R"([[site]]
hosts = ["a.com"]
root = "www"
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->default_site, 1u);
  EXPECT_TRUE(config->sites[1].is_default);
}

TEST_F(LoadTest, Ipv6AndTableListenForms) {
  auto config = load_ok(
      R"(listen = ["[::1]:8080", "127.0.0.1:8080", { address = "[::]:0", backlog = 128 }, ":0"]
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->listen.size(), 4u);
  EXPECT_EQ(config->listen[0].addr.ss_family, AF_INET6);
  EXPECT_EQ(config->listen[0].addr_len, sizeof(sockaddr_in6));
  EXPECT_EQ(format_endpoint(config->listen[0].addr), "[::1]:8080");
  EXPECT_EQ(config->listen[0].pos.line, 1u);
  EXPECT_EQ(config->listen[0].pos.column, 11u);
  EXPECT_EQ(config->listen[1].addr.ss_family, AF_INET);
  EXPECT_EQ(config->listen[2].backlog, 128);
  EXPECT_EQ(format_endpoint(config->listen[2].addr), "[::]:0");
  EXPECT_EQ(format_endpoint(config->listen[3].addr), "0.0.0.0:0");
}

TEST_F(LoadTest, ListenHttp2IsOffOnPlainListenersUnlessAsked) {
  auto config = load_ok(R"(listen = ["127.0.0.1:0", { address = "127.0.0.1:0", http2 = true }]
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->listen.size(), 2u);
  EXPECT_FALSE(config->listen[0].tls);
  EXPECT_FALSE(config->listen[0].http2);
  EXPECT_FALSE(config->listen[1].tls);
  EXPECT_TRUE(config->listen[1].http2);
}

TEST_F(LoadTest, SingleListenTable) {
  auto config = load_ok(R"(listen = { address = "localhost:9000" }
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->listen.size(), 1u);
  EXPECT_EQ(format_endpoint(config->listen[0].addr), "127.0.0.1:9000");
}

TEST_F(LoadTest, LimitsAndMimeTypes) {
  auto config = load_ok(R"([limits]
header_timeout = "500ms"
keepalive_timeout = 0
body_timeout = "5m"
send_timeout = "1h"
shutdown_timeout = 10
max_connections = 1000
max_header_bytes = "32k"
max_body_bytes = "1g"
max_requests_per_connection = 100000

[mime_types]
".WebManifest" = "application/manifest+json"
wasm = "application/wasm"

[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  const Limits& limits = config->limits;
  EXPECT_EQ(limits.header_timeout, Millis(500));
  EXPECT_EQ(limits.keepalive_timeout, Millis(0));
  EXPECT_EQ(limits.body_timeout, Millis(300'000));
  EXPECT_EQ(limits.send_timeout, Millis(3'600'000));
  EXPECT_EQ(limits.shutdown_timeout, Millis(10'000));
  EXPECT_EQ(limits.max_connections, 1000u);
  EXPECT_EQ(limits.max_header_bytes, 32u * 1024);
  EXPECT_EQ(limits.max_body_bytes, uint64_t{1} << 30);
  EXPECT_EQ(limits.max_requests_per_connection, 100000u);
  EXPECT_EQ(config->mime_types.at("webmanifest"), "application/manifest+json");
  EXPECT_EQ(config->mime_types.at("wasm"), "application/wasm");
}

TEST_F(LoadTest, ProcessSettingsAndRelativePaths) {
  auto config = load_ok(R"(workers = "auto"
user = "root"
group = "root"
pid_file = "run/peregrine.pid"
error_log = "logs/error.log"
log_level = "debug"
[[site]]
root = "www"
access_log = "logs/access.log"
access_log_format = "json"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->workers, 0);
  EXPECT_EQ(config->user, "root");
  EXPECT_EQ(config->group, "root");
  EXPECT_EQ(config->pid_file, dir_.path("run/peregrine.pid"));
  EXPECT_EQ(config->error_log, dir_.path("logs/error.log"));
  EXPECT_EQ(config->log_level, LogLevel::kDebug);
  EXPECT_EQ(config->sites[0].access_log.path, dir_.path("logs/access.log"));
  EXPECT_EQ(config->sites[0].access_log.format, AccessLogFormat::kJson);
}

TEST_F(LoadTest, LoadFileResolvesRootsAgainstTheFilesDirectory) {
  dir_.mkdir("conf/site");
  dir_.write("conf/peregrine.toml", "[[site]]\nroot = \"site\"\n");
  LoadResult result = load_file(dir_.path("conf/peregrine.toml"));
  ASSERT_TRUE(result.errors.empty()) << result.errors[0].to_string();
  ASSERT_NE(result.config, nullptr);
  EXPECT_EQ(result.config->source, dir_.path("conf/peregrine.toml"));
  EXPECT_EQ(result.config->sites[0].static_files.root, dir_.path("conf/site"));
}

TEST_F(LoadTest, CommentsBomAndEmptyTablesAreFine) {
  auto config =
      load_ok("\xEF\xBB\xBF# peregrine\n[limits]\n[mime_types]\n[[site]] # main\nroot = \"www\"\n");
  EXPECT_NE(config, nullptr);
}

// ---------------------------------------------------------------- errors: syntax and keys

TEST_F(LoadTest, TomlSyntaxErrorHasItsPosition) {
  LoadResult result = load(R"(workers = 4
listen = ["*:80",
)");
  EXPECT_EQ(result.config, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].pos.line, 2u);
  EXPECT_EQ(result.errors[0].pos.column, 19u);
  EXPECT_EQ(result.errors[0].message,
            "TOML syntax error while parsing array: encountered end-of-file");
}

TEST_F(LoadTest, TomlDuplicateKeyIsASyntaxError) {
  std::vector<std::string> all = errors("workers = 4\nworkers = 5\n");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].rfind("2:", 0), 0u) << all[0];
  EXPECT_NE(all[0].find("TOML syntax error"), std::string::npos) << all[0];
}

TEST_F(LoadTest, DeeplyNestedInputIsAnErrorNotACrash) {
  std::string toml = "a = " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  LoadResult result = load(toml);
  EXPECT_EQ(result.config, nullptr);
  EXPECT_FALSE(result.errors.empty());
}

TEST_F(LoadTest, UnknownKeySuggestsTheClosestName) {
  EXPECT_EQ(error(R"([limits]
keepalive_timout = "75s"
[[site]]
root = "www"
)"),
            "2:1: unknown key 'keepalive_timout' in [limits] (hint: did you mean "
            "'keepalive_timeout'?)");
}

TEST_F(LoadTest, UnknownTopLevelKeyListsValidKeys) {
  EXPECT_EQ(error(R"(colour = "blue"
[[site]]
root = "www"
)"),
            "1:1: unknown key 'colour' at the top level (hint: valid keys: listen, workers, user, "
            "group, pid_file, error_log, log_level, server_header, limits, mime_types, upstream, "
            "site, tls, client_address, request_id, limit, admin, event_backend, "
            "batch_wait_us)");
}

TEST_F(LoadTest, UnknownSectionIsAnUnknownKey) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[server]
workers = 2
)"),
            "3:2: unknown key 'server' at the top level (hint: valid keys: listen, workers, user, "
            "group, pid_file, error_log, log_level, server_header, limits, mime_types, upstream, "
            "site, tls, client_address, request_id, limit, admin, event_backend, "
            "batch_wait_us)");
}

TEST_F(LoadTest, TopLevelKeyAfterASectionHeaderSaysWhy) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
workers = 4
)"),
            "3:1: unknown key 'workers' in [[site]] (hint: 'workers' is a top-level key; keys "
            "after a [section] header belong to that section, so move it above the first one)");
}

TEST_F(LoadTest, SiteKeyInARouteSaysWhereItBelongs) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
hosts = ["a.com"]
)"),
            "5:1: unknown key 'hosts' in [[site.route]] (hint: 'hosts' is set on the [[site]], "
            "not on a route)");
}

TEST_F(LoadTest, KeysInTheWrongSectionSayWhereTheyBelong) {
  std::vector<std::string> all = errors(R"(root = "www"
max_body_bytes = "10m"
[[site]]
root = "www"
exact = "/"
)");
  EXPECT_EQ(all, (std::vector<std::string>{
                     "1:1: unknown key 'root' at the top level (hint: 'root' is set on a [[site]] "
                     "(or a [[site.route]]))",
                     "2:1: unknown key 'max_body_bytes' at the top level (hint: 'max_body_bytes' "
                     "belongs in [limits])",
                     "5:1: unknown key 'exact' in [[site]] (hint: 'exact' belongs in a "
                     "[[site.route]] table)"}));
}

TEST_F(LoadTest, UnknownKeyInListenTable) {
  EXPECT_EQ(error(R"(listen = { address = "*:80", backlg = 5 }
[[site]]
root = "www"
)"),
            "1:30: unknown key 'backlg' in a listen table (hint: did you mean 'backlog'?)");
}

// ---------------------------------------------------------------- errors: types and ranges

TEST_F(LoadTest, WrongTypeNamesTheExpectedType) {
  EXPECT_EQ(error(R"(workers = "four"
[[site]]
root = "www"
)"),
            "1:11: 'workers' must be an integer 1..256 or \"auto\", not a string (\"four\")");
}

TEST_F(LoadTest, QuotedNumberGetsAHint) {
  EXPECT_EQ(error(R"(workers = "4"
[[site]]
root = "www"
)"),
            "1:11: 'workers' must be an integer 1..256 or \"auto\", not a string (\"4\") (hint: "
            "write numbers without quotes)");
}

TEST_F(LoadTest, WorkersOutOfRange) {
  EXPECT_EQ(error("workers = 300\n[[site]]\nroot = \"www\"\n"),
            "1:11: 'workers' is 300; it must be between 1 and 256");
  EXPECT_EQ(error("workers = 0\n[[site]]\nroot = \"www\"\n"),
            "1:11: 'workers' is 0; it must be between 1 and 256 (hint: write \"auto\" for one "
            "worker per core)");
}

TEST_F(LoadTest, QuotedBooleanGetsAHint) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
etag = "true"
)"),
            "3:8: 'site.etag' must be a boolean, not a string (\"true\") (hint: write true or "
            "false without quotes)");
}

TEST_F(LoadTest, BadDurationShowsValidForms) {
  EXPECT_EQ(error(R"([limits]
header_timeout = "20 seconds"
[[site]]
root = "www"
)"),
            "2:18: invalid duration \"20 seconds\" for 'limits.header_timeout' (hint: write a "
            "duration as \"500ms\", \"20s\", \"5m\", \"1h\" or an integer number of seconds)");
}

TEST_F(LoadTest, FloatDurationIsAWrongType) {
  EXPECT_EQ(error(R"([limits]
body_timeout = 1.5
[[site]]
root = "www"
)"),
            "2:16: 'limits.body_timeout' must be a duration (string or integer seconds), not a "
            "float (hint: write a duration as \"500ms\", \"20s\", \"5m\", \"1h\" or an integer "
            "number of seconds)");
}

TEST_F(LoadTest, DurationOutOfRange) {
  std::vector<std::string> all = errors(R"([limits]
header_timeout = 0
send_timeout = "48h"
[[site]]
root = "www"
)");
  EXPECT_EQ(all, (std::vector<std::string>{
                     "2:18: 'limits.header_timeout' is 0s; it must be between 1ms and 24h",
                     "3:16: 'limits.send_timeout' is 48h; it must be between 1ms and 24h"}));
}

TEST_F(LoadTest, BadSizeShowsValidForms) {
  EXPECT_EQ(error(R"([limits]
max_header_bytes = "16kb"
[[site]]
root = "www"
)"),
            "2:20: invalid size \"16kb\" for 'limits.max_header_bytes' (hint: write a size as an "
            "integer number of bytes or \"16k\", \"1m\", \"1g\" (powers of 1024))");
}

TEST_F(LoadTest, SizeOutOfRange) {
  EXPECT_EQ(error(R"([limits]
max_header_bytes = "2m"
[[site]]
root = "www"
)"),
            "2:20: 'limits.max_header_bytes' is 2m; it must be between 1k and 1m");
}

TEST_F(LoadTest, IntegerOutOfRange) {
  EXPECT_EQ(error(R"([limits]
max_connections = 0
[[site]]
root = "www"
)"),
            "2:19: 'limits.max_connections' is 0; it must be between 1 and 1048576");
}

TEST_F(LoadTest, UnknownLogLevel) {
  EXPECT_EQ(error("log_level = \"warning\"\n[[site]]\nroot = \"www\"\n"),
            "1:13: unknown log level \"warning\" (hint: did you mean 'warn'?)");
  EXPECT_EQ(error("log_level = \"verbose\"\n[[site]]\nroot = \"www\"\n"),
            "1:13: unknown log level \"verbose\" (hint: one of: debug, info, warn, error)");
}

TEST_F(LoadTest, EventBackend) {
  EXPECT_EQ(load_ok("[[site]]\nroot = \"www\"\n")->event_backend, EventBackend::kEpoll);
  EXPECT_EQ(load_ok("event_backend = \"io_uring\"\n[[site]]\nroot = \"www\"\n")->event_backend,
            EventBackend::kIoUring);
  EXPECT_EQ(load_ok("event_backend = \"auto\"\n[[site]]\nroot = \"www\"\n")->event_backend,
            EventBackend::kAuto);
  EXPECT_EQ(load_ok("event_backend = \"epoll\"\n[[site]]\nroot = \"www\"\n")->event_backend,
            EventBackend::kEpoll);
}

TEST_F(LoadTest, UnknownEventBackend) {
  EXPECT_EQ(error("event_backend = \"iouring\"\n[[site]]\nroot = \"www\"\n"),
            "1:17: unknown event backend \"iouring\" (hint: did you mean 'io_uring'?)");
  EXPECT_EQ(error("event_backend = \"kqueue\"\n[[site]]\nroot = \"www\"\n"),
            "1:17: unknown event backend \"kqueue\" (hint: one of: epoll, io_uring, auto)");
  EXPECT_EQ(error("event_backend = 1\n[[site]]\nroot = \"www\"\n").substr(0, 5), "1:17:");
}

TEST_F(LoadTest, BatchWait) {
  EXPECT_EQ(load_ok("[[site]]\nroot = \"www\"\n")->batch_wait_us, 100u);
  EXPECT_EQ(load_ok("batch_wait_us = 0\n[[site]]\nroot = \"www\"\n")->batch_wait_us, 0u);
  EXPECT_EQ(load_ok("batch_wait_us = 1000\n[[site]]\nroot = \"www\"\n")->batch_wait_us, 1000u);
  const std::string too_long = error("batch_wait_us = 1001\n[[site]]\nroot = \"www\"\n");
  EXPECT_EQ(too_long.substr(0, 6), "1:17: ") << too_long;
  EXPECT_NE(too_long.find("1000"), std::string::npos) << too_long;
  EXPECT_EQ(error("batch_wait_us = \"100us\"\n[[site]]\nroot = \"www\"\n").substr(0, 6), "1:17: ");
}

TEST_F(LoadTest, ErrorLogCannotBeOff) {
  EXPECT_EQ(error("error_log = \"off\"\n[[site]]\nroot = \"www\"\n"),
            "1:13: 'error_log' cannot be \"off\" (hint: errors always go somewhere: write "
            "\"stderr\", \"stdout\" or a file path)");
  auto config = load_ok("error_log = \"stdout\"\n[[site]]\nroot = \"www\"\n");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->error_log, "stdout");
}

TEST_F(LoadTest, ServerHeaderRejectsControlCharacters) {
  EXPECT_EQ(error("server_header = \"x\\r\\nSet-Cookie: a=b\"\n[[site]]\nroot = \"www\"\n"),
            "1:17: 'server_header' contains control characters");
}

TEST_F(LoadTest, InvalidMimeType) {
  EXPECT_EQ(error(R"([mime_types]
js = "javascript"
[[site]]
root = "www"
)"),
            "2:6: invalid media type \"javascript\" for 'js' (hint: a media type looks like "
            "\"text/html\" or \"application/json\")");
}

TEST_F(LoadTest, MimeTypeExtensionsCollideAfterNormalising) {
  EXPECT_EQ(error(R"([mime_types]
JS = "text/javascript"
".js" = "text/javascript"
[[site]]
root = "www"
)"),
            "3:1: extension 'js' is listed twice in [mime_types] (hint: first at line 2)");
}

// ---------------------------------------------------------------- errors: listen

TEST_F(LoadTest, InvalidListenAddress) {
  EXPECT_EQ(error(R"(listen = ["127.0.0.1:99999"]
[[site]]
root = "www"
)"),
            "1:11: invalid port '99999' in listen address '127.0.0.1:99999' (hint: a port is an "
            "integer 0..65535 (0 = any free port))");
}

TEST_F(LoadTest, BareIpv6ListenAddress) {
  EXPECT_EQ(error(R"(listen = "::1:8080"
[[site]]
root = "www"
)"),
            "1:10: listen address '::1:8080' looks like an IPv6 address without brackets (hint: "
            "write IPv6 addresses in brackets: \"[::1]:8080\")");
}

TEST_F(LoadTest, DuplicateListenAddress) {
  EXPECT_EQ(error(R"(listen = ["*:8080", "0.0.0.0:8080"]
[[site]]
root = "www"
)"),
            "1:21: duplicate listen address '0.0.0.0:8080' (hint: '*:8080' at line 1 already "
            "listens there)");
}

TEST_F(LoadTest, EmptyListenAndMissingAddress) {
  EXPECT_EQ(error("listen = []\n[[site]]\nroot = \"www\"\n"),
            "1:10: 'listen' is empty (hint: listen on at least one address, e.g. \"*:80\")");
  EXPECT_EQ(error("listen = [{ backlog = 10 }]\n[[site]]\nroot = \"www\"\n"),
            "1:11: listen table has no 'address' (hint: e.g. { address = \"*:80\", backlog = "
            "4096 })");
}

// ---------------------------------------------------------------- errors: sites

TEST_F(LoadTest, NoSite) {
  EXPECT_EQ(error("workers = 2\n"),
            "1:1: no [[site]] is defined (hint: add a [[site]] table, e.g. [[site]] root = "
            "\"/var/www/html\")");
}

TEST_F(LoadTest, SiteWrittenAsASingleTable) {
  EXPECT_EQ(error("[site]\nroot = \"www\"\n"),
            "1:1: 'site' must be an array of tables, not a table (hint: write each site as a "
            "[[site]] table (double brackets))");
}

TEST_F(LoadTest, TwoDefaultSites) {
  EXPECT_EQ(error(R"([[site]]
hosts = ["a.com"]
root = "www"
default = true
[[site]]
hosts = ["b.com"]
root = "www"
default = true
)"),
            "8:11: more than one site is marked default (hint: the site at line 1 is already the "
            "default)");
}

TEST_F(LoadTest, HostlessSiteCompetesWithTheMarkedDefault) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site]]
hosts = ["a.com"]
root = "www"
default = true
)"),
            "1:1: this site has no 'hosts', so it matches any host, but the site at line 3 is "
            "marked default (hint: give this site hosts, or mark it default instead)");
}

TEST_F(LoadTest, TwoHostlessSites) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site]]
root = "www"
)"),
            "3:1: more than one site has no 'hosts' (hint: a site without hosts matches any host, "
            "and so does the site at line 1; give this one hosts)");
}

TEST_F(LoadTest, DuplicateHostAcrossSitesIncludingWildcards) {
  EXPECT_EQ(error(R"([[site]]
hosts = ["*.example.com"]
root = "www"
[[site]]
hosts = ["example.com", "*.Example.com"]
root = "www"
)"),
            "5:25: host '*.example.com' is already used by another site (hint: first at line 2)");
}

TEST_F(LoadTest, DuplicateHostWithinASite) {
  EXPECT_EQ(error(R"([[site]]
hosts = ["a.com", "A.com"]
root = "www"
)"),
            "2:19: host 'a.com' is listed twice (hint: first at line 2)");
}

TEST_F(LoadTest, PortInHostName) {
  EXPECT_EQ(error(R"([[site]]
hosts = ["example.com:8080"]
root = "www"
)"),
            "2:10: ports are not allowed in host names ('example.com:8080') (hint: the port of "
            "the Host header is ignored when choosing a site; write 'example.com')");
}

TEST_F(LoadTest, InvalidHostNames) {
  std::vector<std::string> all = errors(R"([[site]]
hosts = ["*", "www.*.com", "bad host", "a..b"]
root = "www"
)");
  EXPECT_EQ(all, (std::vector<std::string>{
                     "2:10: '*' alone is not a host pattern (hint: omit 'hosts' (or leave it "
                     "empty) to match any host)",
                     "2:15: invalid wildcard in host name 'www.*.com' (hint: only a leading "
                     "wildcard label is supported, as in '*.example.com')",
                     "2:28: invalid character ' ' in host name 'bad host' (hint: host names use "
                     "letters, digits, '-' and '.')",
                     "2:40: invalid host name 'a..b' (empty label)"}));
}

TEST_F(LoadTest, SiteWithoutRootOrRoutes) {
  EXPECT_EQ(error(R"([[site]]
hosts = ["a.com"]
)"),
            "1:1: site has neither a 'root' nor any [[site.route]] (hint: add root = "
            "\"/var/www/html\" to serve files, or routes)");
}

TEST_F(LoadTest, ErrorPageKeysAreStatusCodes) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
error_pages = { 302 = "/x.html", 404 = "/404.html" }
)"),
            "3:17: error page key '302' is not a status 400..599 (hint: keys are status codes, "
            "e.g. 404 = \"/errors/404.html\")");
}

TEST_F(LoadTest, ErrorPagePathsAreUnderTheRoot) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[site.error_pages]
404 = "errors/404.html"
)"),
            "4:7: error page \"errors/404.html\" must be a path under the site root (hint: start "
            "it with '/', e.g. \"/errors/404.html\")");
}

// A missing page is no reason to refuse the configuration (it may be deployed after the
// server), but `peregrine -t`, the start and a reload say so at the entry's position.
TEST_F(LoadTest, ErrorPageThatCannotBeReadIsAWarning) {
  dir_.write("www/errors/404.html", "<h1>not here</h1>");
  dir_.mkdir("www/errors/500.html");
  LoadResult result = load(R"([[site]]
root = "www"
error_pages = { 404 = "/errors/404.html", 500 = "/errors/500.html", 503 = "/maintenance.html" }
)");
  ASSERT_NE(result.config, nullptr);
  EXPECT_TRUE(result.errors.empty());
  std::vector<std::string> warnings;
  for (const ConfigError& w : result.warnings) {
    EXPECT_EQ(w.pos.file, dir_.path("test.toml"));
    EXPECT_TRUE(w.warning);
    warnings.push_back(test_support::describe(w));
  }
  EXPECT_EQ(warnings,
            (std::vector<std::string>{
                "3:49: error page \"/errors/500.html\" for 500: " + www() +
                    "/errors/500.html is a directory (hint: until it can be read, 500 answers "
                    "carry the built-in page; create the file or remove the entry)",
                "3:75: error page \"/maintenance.html\" for 503: " + www() +
                    "/maintenance.html does not exist (hint: until it can be read, 503 answers "
                    "carry the built-in page; create the file or remove the entry)"}));
  // Still served when it appears later: the entry is kept.
  EXPECT_EQ(result.config->sites[0].error_pages.at(503), "/maintenance.html");
}

TEST_F(LoadTest, ErrorPagesNeedASiteRoot) {
  EXPECT_EQ(error(R"([[site]]
error_pages = { 404 = "/404.html" }
[[site.route]]
prefix = "/"
return = 404
)"),
            "2:15: 'error_pages' needs the site's 'root' (hint: error pages are files under the "
            "site root; add root = \"...\")");
}

TEST_F(LoadTest, UnknownAccessLogFormat) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
access_log_format = "jsno"
)"),
            "3:21: unknown access log format \"jsno\" (hint: did you mean 'json'?)");
}

TEST_F(LoadTest, UserMustExist) {
  EXPECT_EQ(error(R"(user = "no-such-user-peregrine"
[[site]]
root = "www"
)"),
            "1:8: user 'no-such-user-peregrine' does not exist (hint: create it (e.g. useradd "
            "--system no-such-user-peregrine) or name an existing user)");
}

TEST_F(LoadTest, GroupNeedsUserAndMustExist) {
  std::vector<std::string> all = errors(R"(group = "no-such-group-peregrine"
[[site]]
root = "www"
)");
  EXPECT_EQ(all, (std::vector<std::string>{
                     "1:9: group 'no-such-group-peregrine' does not exist",
                     "1:9: 'group' is set without 'user' (hint: privileges are dropped only to a "
                     "user; add user = \"...\")"}));
}

// ---------------------------------------------------------------- errors: routes

TEST_F(LoadTest, RouteWithoutMatchKey) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
return = 200
)"),
            "3:1: route has no match key (hint: give it exactly one of: exact = \"/path\", prefix "
            "= \"/dir/\", extension = \"php\", regex = \"^/...$\")");
}

TEST_F(LoadTest, RouteWithSeveralMatchKeys) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
regex = "^/a/"
prefix = "/a/"
)"),
            "5:1: route has more than one match key ('regex' and 'prefix') (hint: use exactly one "
            "of exact, prefix, extension, regex; add another [[site.route]] for the other)");
}

TEST_F(LoadTest, BadRegexPointsAtTheValue) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
regex = "^/(a"
)"),
            "4:9: invalid regex \"^/(a\": missing closing parenthesis at offset 4 (hint: PCRE2 "
            "syntax, e.g. regex = \"^/user/([0-9]+)$\")");
}

TEST_F(LoadTest, ExactAndPrefixMustStartWithASlash) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
prefix = "images/"
)"),
            "4:10: 'site.route.prefix' must start with '/' (hint: e.g. \"/images/\")");
}

TEST_F(LoadTest, InvalidMethod) {
  EXPECT_EQ(
      error(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
methods = ["GET", "BAD METHOD"]
)"),
      "5:19: invalid method \"BAD METHOD\" (hint: methods are tokens such as GET, HEAD, POST)");
}

TEST_F(LoadTest, RouteWrittenAsASingleTable) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[site.route]
prefix = "/"
)"),
            "3:1: 'site.route' must be an array of tables, not a table (hint: write each route as "
            "a [[site.route]] table (double brackets))");
}

// ---------------------------------------------------------------- errors: collection

TEST_F(LoadTest, AllErrorsAreCollectedInPositionOrder) {
  std::vector<std::string> all = errors(R"(workers = 0
[limits]
max_connections = 0
[[site]]
root = "missing"
[[site.route]]
prefix = "/"
etag = "yes"
[[site]]
hosts = ["b.com"]
rot = "www"
)");
  ASSERT_EQ(all.size(), 6u) << ::testing::PrintToString(all);
  EXPECT_EQ(all[0].substr(0, 5), "1:11:");
  EXPECT_EQ(all[1].substr(0, 5), "3:19:");
  EXPECT_EQ(all[2].substr(0, 4), "5:8:");
  EXPECT_EQ(all[3].substr(0, 4), "8:8:");
  EXPECT_EQ(all[4],
            "9:1: site has neither a 'root' nor any [[site.route]] (hint: add root = "
            "\"/var/www/html\" to serve files, or routes)");
  EXPECT_EQ(all[5], "11:1: unknown key 'rot' in [[site]] (hint: did you mean 'root'?)");
}

TEST_F(LoadTest, ToStringFormat) {
  ConfigError with_hint{SourcePos{"/etc/peregrine.toml", 12, 3}, "unknown key 'x'",
                        "did you mean 'y'?"};
  EXPECT_EQ(with_hint.to_string(),
            "/etc/peregrine.toml:12:3: error: unknown key 'x' (hint: did you mean 'y'?)");
  ConfigError without_hint{SourcePos{"a.toml", 1, 11}, "bad", ""};
  EXPECT_EQ(without_hint.to_string(), "a.toml:1:11: error: bad");
  ConfigError no_position{SourcePos{"a.toml", 0, 0}, "cannot open config file: No such file", ""};
  EXPECT_EQ(no_position.to_string(), "a.toml: error: cannot open config file: No such file");
}

TEST_F(LoadTest, ToStringOfARealError) {
  LoadResult result = load_string("workers = \"four\"\n[[site]]\nroot = \"/\"\n", "peregrine.toml");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].to_string(),
            "peregrine.toml:1:11: error: 'workers' must be an integer 1..256 or \"auto\", not a "
            "string (\"four\")");
}

TEST_F(LoadTest, MissingFile) {
  LoadResult result = load_file(dir_.path("nope.toml"));
  EXPECT_EQ(result.config, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].to_string(),
            dir_.path("nope.toml") + ": error: cannot open config file: No such file or directory");
}

TEST_F(LoadTest, DirectoryAsConfigFile) {
  LoadResult result = load_file(dir_.path("www"));
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].message, "config file is not a regular file");
}

}  // namespace
}  // namespace peregrine::config
