// The command line parser and build_config (quick mode and -c FILE with overrides).
#include "config/cli.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "config/listen_address.h"
#include "config/units.h"
#include "handlers/builtin.h"
#include "handlers/fastcgi/options.h"
#include "handlers/return/options.h"

namespace peregrine::config {
namespace {

namespace fs = std::filesystem;

CommandLineResult parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"peregrine"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// A temporary directory that is also the current directory for the test's lifetime
// (quick mode looks for ./www).
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_cwd_ = fs::current_path();
    char pattern[] = "/tmp/peregrine-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = fs::canonical(pattern).string();
    fs::current_path(dir_);
  }
  void TearDown() override {
    fs::current_path(old_cwd_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(std::string_view sub) const { return dir_ + "/" + std::string(sub); }
  void write(std::string_view sub, std::string_view text) const {
    std::ofstream(path(sub)) << text;
  }

  std::shared_ptr<const Config> build_ok(const CommandLine& cli) {
    LoadResult result = build_config(cli, handlers::builtin());
    for (const ConfigError& e : result.errors) ADD_FAILURE() << e.to_string();
    EXPECT_NE(result.config, nullptr);
    return result.config;
  }

  std::vector<std::string> build_errors(const CommandLine& cli) {
    LoadResult result = build_config(cli, handlers::builtin());
    EXPECT_EQ(result.config, nullptr);
    std::vector<std::string> out;
    for (const ConfigError& e : result.errors) out.push_back(e.to_string());
    return out;
  }

  fs::path old_cwd_;
  std::string dir_;
};

// ---------------------------------------------------------------- parse_command_line

TEST(CommandLine, NoArgumentsIsQuickModeWithDefaults) {
  CommandLineResult r = parse({});
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(r.cli.help);
  EXPECT_FALSE(r.cli.version);
  EXPECT_FALSE(r.cli.test_only);
  EXPECT_EQ(r.cli.config_file, "");
  EXPECT_TRUE(r.cli.listen.empty());
  EXPECT_EQ(r.cli.workers, -1);
}

TEST(CommandLine, SpaceSeparatedValues) {
  CommandLineResult r = parse({"--listen", "*:80", "--root", "/srv/www", "--workers", "4",
                               "--access-log", "off", "--pid-file", "/run/p.pid", "--error-log",
                               "/var/log/p.log", "--log-level", "warn", "--user", "www-data"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.listen, std::vector<std::string>{"*:80"});
  EXPECT_EQ(r.cli.root, "/srv/www");
  EXPECT_EQ(r.cli.workers, 4);
  EXPECT_EQ(r.cli.access_log, "off");
  EXPECT_EQ(r.cli.pid_file, "/run/p.pid");
  EXPECT_EQ(r.cli.error_log, "/var/log/p.log");
  EXPECT_EQ(r.cli.log_level, "warn");
  EXPECT_EQ(r.cli.user, "www-data");
}

TEST(CommandLine, EqualsSeparatedValues) {
  CommandLineResult r = parse({"--listen=[::1]:8080", "--root=./site", "--workers=auto",
                               "--access-log=/tmp/a=b.log", "--log-level=debug"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.listen, std::vector<std::string>{"[::1]:8080"});
  EXPECT_EQ(r.cli.root, "./site");
  EXPECT_EQ(r.cli.workers, 0);
  EXPECT_EQ(r.cli.access_log, "/tmp/a=b.log");  // only the first '=' separates
  EXPECT_EQ(r.cli.log_level, "debug");
}

TEST(CommandLine, ListenIsRepeatable) {
  CommandLineResult r = parse({"--listen", "8080", "--listen=[::]:8080", "--listen", ":9090"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.listen, (std::vector<std::string>{"8080", "[::]:8080", ":9090"}));
}

TEST(CommandLine, ShortFlagsAndConfigFile) {
  CommandLineResult r = parse({"-t", "-c", "/etc/peregrine.toml"});
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.cli.test_only);
  EXPECT_EQ(r.cli.config_file, "/etc/peregrine.toml");

  r = parse({"-c/etc/p.toml"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.config_file, "/etc/p.toml");

  r = parse({"--config=/etc/q.toml", "--test"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.config_file, "/etc/q.toml");
  EXPECT_TRUE(r.cli.test_only);
}

TEST(CommandLine, HelpAndVersion) {
  EXPECT_TRUE(parse({"-h"}).cli.help);
  EXPECT_TRUE(parse({"--help"}).cli.help);
  EXPECT_TRUE(parse({"-v"}).cli.version);
  EXPECT_TRUE(parse({"--version"}).cli.version);
}

TEST(CommandLine, LaterValueWins) {
  CommandLineResult r = parse({"--root", "a", "--root", "b", "--workers", "2", "--workers=3"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.root, "b");
  EXPECT_EQ(r.cli.workers, 3);
}

TEST(CommandLine, UnknownOptionSuggestsTheClosest) {
  EXPECT_EQ(parse({"--lisen", "80"}).error, "unknown option '--lisen' (did you mean '--listen'?)");
  EXPECT_EQ(parse({"--frobnicate"}).error, "unknown option '--frobnicate'");
  EXPECT_EQ(parse({"-x"}).error, "unknown option '-x'");
}

TEST(CommandLine, MissingValue) {
  EXPECT_EQ(parse({"--root"}).error, "option '--root' needs a value");
  EXPECT_EQ(parse({"-t", "-c"}).error, "option '-c' needs a value");
  EXPECT_EQ(parse({"--root="}).error, "option '--root' needs a non-empty value");
}

TEST(CommandLine, FlagsTakeNoValue) {
  EXPECT_EQ(parse({"--help=yes"}).error, "option '--help' takes no value");
  EXPECT_EQ(parse({"-tv"}).error, "unexpected text after '-t' in '-tv'");
}

TEST(CommandLine, PositionalArgumentsAreRejected) {
  EXPECT_EQ(parse({"/etc/peregrine.toml"}).error, "unexpected argument '/etc/peregrine.toml'");
  EXPECT_EQ(parse({"-"}).error, "unexpected argument '-'");
  EXPECT_EQ(parse({"--"}).error, "unexpected '--': peregrine takes no file arguments");
}

TEST(CommandLine, InvalidWorkers) {
  EXPECT_EQ(parse({"--workers", "four"}).error,
            "invalid value 'four' for --workers (expected \"auto\" or 1..256)");
  EXPECT_EQ(parse({"--workers=300"}).error,
            "invalid value '300' for --workers (expected \"auto\" or 1..256)");
  EXPECT_EQ(parse({"--workers=-1"}).error,
            "invalid value '-1' for --workers (expected \"auto\" or 1..256)");
  EXPECT_EQ(parse({"--workers=0"}).cli.workers, 0);
}

TEST(CommandLine, InvalidLogLevel) {
  EXPECT_EQ(parse({"--log-level", "loud"}).error,
            "invalid value 'loud' for --log-level (expected debug, info, warn or error)");
}

TEST(CommandLine, EventBackend) {
  EXPECT_EQ(parse({"--event-backend", "io_uring"}).cli.event_backend, "io_uring");
  EXPECT_EQ(parse({"--event-backend=auto"}).cli.event_backend, "auto");
  EXPECT_EQ(parse({"--event-backend", "uring"}).error,
            "invalid value 'uring' for --event-backend (expected epoll, io_uring or auto)");
}

TEST(CommandLine, UsageMentionsEveryOption) {
  std::string text = usage();
  for (const char* option : {"-c", "-t", "--listen", "--root", "--workers", "--access-log",
                             "--pid-file", "--error-log", "--log-level", "--user", "--max-body",
                             "--event-backend", "--help", "--version", "HUP", "QUIT", "USR1"}) {
    EXPECT_NE(text.find(option), std::string::npos) << option;
  }
}

// ---------------------------------------------------------------- build_config: quick mode

TEST_F(CliTest, QuickModeWithoutWwwServesTheWelcomePage) {
  auto config = build_ok(CommandLine{});
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->source, "<command line>");
  ASSERT_EQ(config->listen.size(), 1u);
  EXPECT_EQ(format_endpoint(config->listen[0].addr), "127.0.0.1:8080");
  ASSERT_EQ(config->sites.size(), 1u);
  const Site& site = config->sites[0];
  EXPECT_TRUE(site.is_default);
  EXPECT_EQ(config->default_site, 0u);
  EXPECT_TRUE(site.hosts.empty());
  EXPECT_EQ(site.access_log.format, AccessLogFormat::kCombined);
  EXPECT_EQ(site.access_log.path, "stdout");
  ASSERT_EQ(site.routes.size(), 1u);
  const Route& route = site.routes[0];
  EXPECT_EQ(route.match, MatchKind::kPrefix);
  EXPECT_EQ(route.pattern, "/");
  EXPECT_EQ(route.type->name, "return");
  EXPECT_EQ(route.options_as<return_route::ReturnOptions>()->status, 200);
  EXPECT_EQ(route.options_as<return_route::ReturnOptions>()->content_type,
            "text/html; charset=utf-8");
  EXPECT_NE(route.options_as<return_route::ReturnOptions>()->body.find("Peregrine is running"),
            std::string::npos);
  EXPECT_NE(route.options_as<return_route::ReturnOptions>()->body.find("peregrine --root"),
            std::string::npos);
  EXPECT_NE(route.options_as<return_route::ReturnOptions>()->body.find("-c "), std::string::npos);
}

// --route: any handler's route, read by the file's reader, before the routes the other options
// make (tests/unit/handlers/echo/ shows it with a handler only the tests know).
TEST_F(CliTest, QuickModeRouteIsARouteTablesKeys) {
  CommandLineResult r = parse({"--route", "prefix = \"/old/\", return = 301, location = \"/new/\"",
                               "--route=exact = \"/ping\", return = 200, body = \"pong\""});
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.cli.routes.size(), 2u);
  auto config = build_ok(r.cli);
  ASSERT_NE(config, nullptr);
  const std::vector<Route>& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 3u);  // and the welcome page, last
  EXPECT_EQ(routes[0].type->name, "return");
  EXPECT_EQ(routes[0].options_as<return_route::ReturnOptions>()->location, "/new/");
  EXPECT_EQ(routes[1].match, MatchKind::kExact);
  EXPECT_EQ(routes[1].options_as<return_route::ReturnOptions>()->body, "pong");

  CommandLine bad;
  bad.routes = {"prefix = \"/a/\", return = 301", "prefix = /a/"};
  std::vector<std::string> errors = build_errors(bad);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[1].find("<command line>: error: --route 'prefix = /a/': TOML syntax error: "),
            0u)
      << errors[1];
  EXPECT_EQ(errors[0],
            "<command line>: error: --route: 'return = 301' needs a 'location' (hint: e.g. "
            "location = \"/new/path\" or \"https://example.com$uri\")");

  CommandLine with_file;
  with_file.config_file = "peregrine.toml";
  with_file.routes = {"prefix = \"/a/\", return = 204"};
  EXPECT_EQ(build_errors(with_file),
            (std::vector<std::string>{
                "<command line>: error: --route cannot be combined with -c (hint: add a "
                "[[site.route]] with those keys to a [[site]] of peregrine.toml)"}));
}

TEST_F(CliTest, QuickModeServesWwwWhenItExists) {
  fs::create_directory(path("www"));
  auto config = build_ok(CommandLine{});
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  EXPECT_EQ(route.type->name, "static");
  EXPECT_EQ(route.static_files.root, path("www"));
  EXPECT_EQ(config->sites[0].static_files.root, path("www"));
}

TEST_F(CliTest, QuickModeWithRoot) {
  fs::create_directories(path("site/public"));
  fs::create_directory(path("www"));  // --root wins over ./www
  CommandLine cli;
  cli.root = "site/public/";
  cli.listen = {"*:0", "[::1]:0"};
  cli.workers = 2;
  cli.log_level = "error";
  cli.pid_file = "peregrine.pid";
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].routes[0].type->name, "static");
  EXPECT_EQ(config->sites[0].routes[0].static_files.root, path("site/public"));
  ASSERT_EQ(config->listen.size(), 2u);
  EXPECT_EQ(format_endpoint(config->listen[1].addr), "[::1]:0");
  EXPECT_EQ(config->workers, 2);
  EXPECT_EQ(config->log_level, LogLevel::kError);
  EXPECT_EQ(config->pid_file, path("peregrine.pid"));
}

TEST_F(CliTest, EventBackendInQuickModeAndOverFile) {
  CommandLine cli;
  cli.event_backend = "auto";
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->event_backend, EventBackend::kAuto);

  fs::create_directory(path("html"));
  write("peregrine.toml", "event_backend = \"epoll\"\n[[site]]\nroot = \"html\"\n");
  cli.config_file = "peregrine.toml";
  cli.event_backend = "io_uring";
  config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->event_backend, EventBackend::kIoUring);
  cli.event_backend.clear();
  config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->event_backend, EventBackend::kEpoll);
}

TEST_F(CliTest, QuickModeAccessLogOverride) {
  CommandLine cli;
  cli.access_log = "off";
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].access_log.format, AccessLogFormat::kOff);

  cli.access_log = "logs/access.log";
  config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].access_log.format, AccessLogFormat::kCombined);
  EXPECT_EQ(config->sites[0].access_log.path, path("logs/access.log"));
}

TEST_F(CliTest, QuickModeErrors) {
  CommandLine cli;
  cli.root = "missing";
  cli.listen = {"80", "example.com:80", "*:80"};
  cli.user = "no-such-user-peregrine";
  EXPECT_EQ(build_errors(cli),
            (std::vector<std::string>{
                "<command line>: error: --listen: listen address 'example.com:80' names a host; "
                "only IP addresses and 'localhost' are accepted (hint: use the interface's IP "
                "address, or \"*:80\" for every interface)",
                "<command line>: error: --listen: duplicate listen address '*:80'",
                "<command line>: error: --root 'missing' does not exist",
                "<command line>: error: --user: user 'no-such-user-peregrine' does not exist"}));
}

// ---------------------------------------------------------------- build_config: -c FILE

TEST_F(CliTest, ConfigFileWithOverrides) {
  fs::create_directory(path("html"));
  write("peregrine.toml", R"(workers = 3
log_level = "warn"
pid_file = "/run/peregrine.pid"
[[site]]
root = "html"
access_log_format = "json"
[[site]]
hosts = ["b.com"]
root = "html"
access_log = "off"
)");
  CommandLine cli;
  cli.config_file = "peregrine.toml";
  cli.workers = 8;
  cli.log_level = "debug";
  cli.error_log = "logs/error.log";
  cli.access_log = "stderr";
  cli.user = "root";
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->source, "peregrine.toml");
  EXPECT_EQ(config->workers, 8);
  EXPECT_EQ(config->log_level, LogLevel::kDebug);
  EXPECT_EQ(config->pid_file, "/run/peregrine.pid");  // not overridden
  EXPECT_EQ(config->error_log, path("logs/error.log"));
  EXPECT_EQ(config->user, "root");
  EXPECT_EQ(config->sites[0].access_log.path, "stderr");
  EXPECT_EQ(config->sites[0].access_log.format, AccessLogFormat::kJson);  // format kept
  EXPECT_EQ(config->sites[1].access_log.path, "stderr");
  EXPECT_EQ(config->sites[1].access_log.format, AccessLogFormat::kCombined);  // was off
}

TEST_F(CliTest, ConfigFileWithoutOverridesIsTheFile) {
  fs::create_directory(path("html"));
  write("p.toml", "workers = 5\n[[site]]\nroot = \"html\"\n");
  CommandLine cli;
  cli.config_file = path("p.toml");
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->workers, 5);
  EXPECT_EQ(config->sites[0].static_files.root, path("html"));
}

TEST_F(CliTest, ListenAndRootCannotBeCombinedWithAFile) {
  CommandLine cli;
  cli.config_file = "p.toml";
  cli.listen = {"80"};
  cli.root = "/srv";
  EXPECT_EQ(build_errors(cli),
            (std::vector<std::string>{
                "<command line>: error: --listen cannot be combined with -c (hint: set listen = "
                "[...] in p.toml)",
                "<command line>: error: --root cannot be combined with -c (hint: set root in a "
                "[[site]] of p.toml)"}));
}

TEST_F(CliTest, ConfigFileErrorsAreReturned) {
  write("bad.toml", "workers = \"four\"\n[[site]]\nroot = \"/\"\n");
  CommandLine cli;
  cli.config_file = "bad.toml";
  EXPECT_EQ(build_errors(cli),
            std::vector<std::string>{"bad.toml:1:11: error: 'workers' must be an integer 1..256 "
                                     "or \"auto\", not a string (\"four\")"});
  cli.config_file = "missing.toml";
  EXPECT_EQ(build_errors(cli),
            std::vector<std::string>{
                "missing.toml: error: cannot open config file: No such file or directory"});
}

TEST_F(CliTest, ParseThenBuild) {
  fs::create_directory(path("public"));
  CommandLineResult r = parse({"--root=public", "--listen", "127.0.0.1:0", "--access-log=off"});
  ASSERT_EQ(r.error, "");
  auto config = build_ok(r.cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].static_files.root, path("public"));
  EXPECT_EQ(config->sites[0].access_log.format, AccessLogFormat::kOff);
  EXPECT_EQ(format_endpoint(config->listen[0].addr), "127.0.0.1:0");
}

// ---------------------------------------------------------------- --max-body

TEST_F(CliTest, MaxBodyIsReadAsTheFilesMaxBodyBytes) {
  const char* argv[] = {"peregrine", "--max-body", "3m"};
  CommandLineResult parsed = parse_command_line(3, argv);
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.cli.max_body, "3m");
  auto config = build_ok(parsed.cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->limits.max_body_bytes, uint64_t{3} << 20);

  CommandLine plain;  // no --max-body: the file's default
  config = build_ok(plain);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->limits.max_body_bytes, Limits{}.max_body_bytes);

  CommandLine bytes;
  bytes.max_body = "0";  // no body at all, as in a file
  config = build_ok(bytes);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->limits.max_body_bytes, 0u);
}

TEST_F(CliTest, FastcgiRaisesTheDefaultBodyLimitForUploads) {
  fs::create_directories(path("site"));
  CommandLine cli;
  cli.root = "site";
  cli.fastcgi = "127.0.0.1:9000";
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  uint64_t expected = 0;
  ASSERT_TRUE(parse_size(kQuickFastcgiMaxBody, &expected));
  EXPECT_EQ(config->limits.max_body_bytes, expected);
  EXPECT_EQ(expected, uint64_t{64} << 20);

  cli.max_body = "1m";  // --max-body wins over the PHP default
  config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->limits.max_body_bytes, uint64_t{1} << 20);
}

TEST_F(CliTest, FastcgiIsACappedGroupSoItsConnectionsAreKept) {
  fs::create_directories(path("site"));
  CommandLine cli;
  cli.root = "site";
  cli.fastcgi = "127.0.0.1:9";  // no php-fpm pool listens there: the default cap
  auto config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->upstreams.size(), 1u);
  EXPECT_EQ(config->upstreams[0].name, "php");
  ASSERT_EQ(config->upstreams[0].servers.size(), 1u);
  EXPECT_EQ(config->upstreams[0].servers[0].max_conns, kQuickFastcgiDefaultConns);
  ASSERT_EQ(config->sites[0].routes.size(), 1u);
  EXPECT_EQ(config->sites[0].routes[0].options_as<fastcgi::FastcgiOptions>()->upstream, "php");

  cli.fastcgi_conns = "12";
  config = build_ok(cli);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->upstreams[0].servers[0].max_conns, 12u);
}

TEST_F(CliTest, FastcgiConnsErrors) {
  fs::create_directories(path("site"));
  CommandLine cli;
  cli.root = "site";
  cli.fastcgi = "127.0.0.1:9000";
  for (const char* bad : {"0", "many", "8x", "100001"}) {
    cli.fastcgi_conns = bad;
    EXPECT_EQ(
        build_errors(cli),
        (std::vector<std::string>{"<command line>: error: --fastcgi-conns: '" + std::string(bad) +
                                  "' is not a number of connections (hint: 1..100000, e.g. "
                                  "php-fpm's pm.max_children)"}));
  }
  CommandLine alone;
  alone.fastcgi_conns = "4";
  EXPECT_EQ(build_errors(alone),
            (std::vector<std::string>{"<command line>: error: "
                                      "--fastcgi-conns needs --fastcgi ADDR"}));
  alone.config_file = "x.toml";
  EXPECT_EQ(build_errors(alone),
            (std::vector<std::string>{"<command line>: error: --fastcgi-conns cannot be combined "
                                      "with -c (hint: set max_conns = 4 on the server of an "
                                      "[[upstream]] group in x.toml)"}));
}

TEST_F(CliTest, MaxBodyErrors) {
  CommandLine cli;
  cli.max_body = "lots";
  EXPECT_EQ(build_errors(cli),
            (std::vector<std::string>{
                "<command line>: error: --max-body: invalid size \"lots\" for "
                "'limits.max_body_bytes' (hint: write a size as an integer number of bytes or "
                "\"16k\", \"1m\", \"1g\" (powers of 1024))"}));
  cli.max_body = "1048577g";
  EXPECT_EQ(build_errors(cli),
            (std::vector<std::string>{"<command line>: error: --max-body: "
                                      "'limits.max_body_bytes' is 1048577g; it must be between 0 "
                                      "and 1048576g"}));
  cli.max_body = "1m";
  cli.config_file = "x.toml";
  EXPECT_EQ(build_errors(cli),
            (std::vector<std::string>{"<command line>: error: --max-body cannot be combined "
                                      "with -c (hint: set max_body_bytes = \"1m\" in [limits] "
                                      "of x.toml)"}));
}

}  // namespace
}  // namespace peregrine::config
