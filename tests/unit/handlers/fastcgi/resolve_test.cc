// Tests for FastcgiHandler::resolve() (src/handlers/fastcgi/fastcgi_handler.h): how a request
// path maps to a script (with PATH_INFO), a static file or a 404, against real files in a
// temporary document root: split_path, index files, try_files and its fallback.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/upstream_address.h"
#include "core/clock.h"
#include "core/regex.h"
#include "event/deferred.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/fastcgi/config.h"
#include "handlers/fastcgi/fastcgi_handler.h"
#include "handlers/static/mime.h"
#include "peregrine/request.h"
#include "server/route_table.h"
#include "support/random_inputs.h"
#include "upstream/group_runtime.h"

namespace peregrine::fastcgi {
namespace {

using Kind = Target::Kind;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kScript:
      return "script";
    case Kind::kStatic:
      return "static";
    case Kind::kNotFound:
      return "not found";
  }
  return "?";
}

class FastcgiResolveTest : public ::testing::Test {
 protected:
  FastcgiResolveTest() : poller_(event::make_epoll_poller()), env_{*poller_, timers_, clock_, 1} {
    clock_.monotonic_ms = 50'000;
    char tmpl[] = "/tmp/peregrine-fcgi-XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;

    config::UpstreamServer server;
    server.address = "unix:" + root_ + "/php-fpm.sock";
    auto* un = reinterpret_cast<sockaddr_un*>(&server.addr);
    un->sun_family = AF_UNIX;
    std::strncpy(un->sun_path, (root_ + "/php-fpm.sock").c_str(), sizeof un->sun_path - 1);
    server.addr_len = sizeof(sockaddr_un);
    group_.name = "php";
    group_.servers.push_back(server);
    runtime_ = std::make_unique<upstream::GroupRuntime>(group_, *poller_, timers_, clock_, 1);

    site_.static_files.root = root_;
    route_.type = &fastcgi::handler_type();
    route_.options = fastcgi_;
    fastcgi_->upstream = "php";

    // The document root:
    //   index.php  info.php  style.css  fallback.html
    //   blog/index.php        shop/index.html        docs/readme.txt (no index)
    //   app/run.cgi           dir.php/  (a directory named like a script)
    write("/index.php");
    write("/info.php");
    write("/style.css");
    write("/fallback.html");
    write("/blog/index.php");
    write("/shop/index.html");
    write("/docs/readme.txt");
    write("/app/run.cgi");
    mkdir_p("/dir.php");
  }

  ~FastcgiResolveTest() override {
    handler_.reset();
    runtime_.reset();
    event::dispose_pending();
    std::string cmd = "rm -rf '" + root_ + "'";
    if (root_.rfind("/tmp/peregrine-fcgi-", 0) == 0) {
      EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
  }

  void mkdir_p(const std::string& rel) {
    std::string path = root_;
    size_t at = 1;
    while (at <= rel.size()) {
      size_t slash = rel.find('/', at);
      if (slash == std::string::npos) slash = rel.size();
      path = root_ + rel.substr(0, slash);
      ::mkdir(path.c_str(), 0755);
      at = slash + 1;
    }
  }

  void write(const std::string& rel, const std::string& content = "<?php echo 1;\n") {
    size_t slash = rel.rfind('/');
    if (slash > 0) mkdir_p(rel.substr(0, slash));
    std::string path = root_ + rel;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ::close(fd);
  }

  FastcgiHandler& handler() {
    if (!handler_) {
      handler_ = std::make_unique<FastcgiHandler>(route_, site_, *runtime_, mime_, env_);
      EXPECT_TRUE(handler_->ok());
    }
    return *handler_;
  }

  Target resolve(std::string_view path, std::string_view query = {}) {
    request_.path_storage.assign(path);
    request_.path = request_.path_storage;
    query_.assign(query);
    request_.query = query_;
    return handler().resolve(request_);
  }

  void set_split(const char* pattern) {
    std::string error;
    size_t offset = 0;
    fastcgi_->split_path = Regex::compile(pattern, &error, &offset);
    ASSERT_NE(fastcgi_->split_path, nullptr) << error;
  }

  std::string root_;
  std::unique_ptr<event::Poller> poller_;
  event::TimerSet timers_;
  Clock clock_;
  handlers::WorkerEnv env_;
  config::UpstreamGroup group_;
  std::unique_ptr<upstream::GroupRuntime> runtime_;
  config::Site site_;
  std::shared_ptr<FastcgiOptions> fastcgi_ = std::make_shared<FastcgiOptions>();
  config::Route route_;
  static_files::MimeTable mime_;
  std::unique_ptr<FastcgiHandler> handler_;
  Request request_;
  std::string query_;
};

#define EXPECT_SCRIPT(target, script, info)                            \
  do {                                                                 \
    const Target& t_ = (target);                                       \
    EXPECT_EQ(t_.kind, Kind::kScript) << "got " << kind_name(t_.kind); \
    EXPECT_EQ(t_.script_name, script);                                 \
    EXPECT_EQ(t_.path_info, info);                                     \
  } while (0)

#define EXPECT_STATIC(target, path)                                    \
  do {                                                                 \
    const Target& t_ = (target);                                       \
    EXPECT_EQ(t_.kind, Kind::kStatic) << "got " << kind_name(t_.kind); \
    EXPECT_EQ(t_.static_path, path);                                   \
  } while (0)

#define EXPECT_NOT_FOUND(target)                                                    \
  do {                                                                              \
    const Target& t_ = (target);                                                    \
    EXPECT_EQ(t_.kind, Kind::kNotFound)                                             \
        << "got " << kind_name(t_.kind) << " " << t_.script_name << t_.static_path; \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Without try_files: the script must exist.

TEST_F(FastcgiResolveTest, ScriptWithPathInfo) {
  Target t = resolve("/info.php/extra/path", "x=1&y=2");
  EXPECT_SCRIPT(t, "/info.php", "/extra/path");
  EXPECT_EQ(t.query, "x=1&y=2");
}

TEST_F(FastcgiResolveTest, ScriptWithoutPathInfo) {
  Target t = resolve("/info.php");
  EXPECT_SCRIPT(t, "/info.php", "");
  EXPECT_EQ(t.query, "");
}

// "/index.php/" and "/index.php/controller/" (CodeIgniter-style URLs) name a script with a
// PATH_INFO that ends in '/'; they are not directories to look for an index in. (With try_files
// they already resolve to the script, see ExistingScriptRunsWithItsPathInfo.)
TEST_F(FastcgiResolveTest, ScriptWithPathInfoEndingInSlash) {
  EXPECT_SCRIPT(resolve("/blog/index.php/"), "/blog/index.php", "/");
  EXPECT_SCRIPT(resolve("/info.php/controller/"), "/info.php", "/controller/");
}

TEST_F(FastcgiResolveTest, SplitStopsAtTheFirstPhpSegmentOnly) {
  write("/a.php.bak");
  write("/x.phpx/y.php");
  // ".php" must end a segment: "/x.phpx" is not a script, "/x.phpx/y.php" is.
  EXPECT_SCRIPT(resolve("/x.phpx/y.php/z"), "/x.phpx/y.php", "/z");
  // No ".php" segment at all: the whole path is the script name.
  EXPECT_SCRIPT(resolve("/a.php.bak"), "/a.php.bak", "");
}

TEST_F(FastcgiResolveTest, MissingScriptIsNotFoundWhenChecked) {
  EXPECT_NOT_FOUND(resolve("/missing.php"));
  EXPECT_NOT_FOUND(resolve("/missing.php/with/info"));
  EXPECT_NOT_FOUND(resolve("/dir.php"));  // a directory is not a script
  EXPECT_NOT_FOUND(resolve("/docs"));
}

TEST_F(FastcgiResolveTest, MissingScriptIsPassedOnWhenNotChecked) {
  fastcgi_->check_script = false;
  Target t = resolve("/missing.php/info", "q");
  EXPECT_SCRIPT(t, "/missing.php", "/info");
  EXPECT_EQ(t.query, "q");
}

TEST_F(FastcgiResolveTest, IndexScriptOnADirectory) {
  EXPECT_SCRIPT(resolve("/", "a=b"), "/index.php", "");
  EXPECT_EQ(resolve("/", "a=b").query, "a=b");
  EXPECT_SCRIPT(resolve("/blog/"), "/blog/index.php", "");
}

TEST_F(FastcgiResolveTest, DirectoryWithoutAnIndexIsNotFound) {
  EXPECT_NOT_FOUND(resolve("/docs/"));
  EXPECT_NOT_FOUND(resolve("/nowhere/"));
}

TEST_F(FastcgiResolveTest, IndexFilesAreTriedInOrderAndStaticOnesServedAsFiles) {
  fastcgi_->index = {"index.php", "index.html"};
  EXPECT_SCRIPT(resolve("/blog/"), "/blog/index.php", "");
  EXPECT_STATIC(resolve("/shop/"), "/shop/");  // the static handler serves the directory index

  write("/both/index.html");
  write("/both/index.php");
  EXPECT_SCRIPT(resolve("/both/"), "/both/index.php", "");  // first listed wins
  fastcgi_->index = {"index.html", "index.php"};
  handler_.reset();
  EXPECT_STATIC(resolve("/both/"), "/both/");
}

TEST_F(FastcgiResolveTest, FastcgiRootOverridesTheSiteRoot) {
  write("/php/only-here.php");
  fastcgi_->root = root_ + "/php/";  // trailing slash is fine
  EXPECT_SCRIPT(resolve("/only-here.php"), "/only-here.php", "");
  EXPECT_NOT_FOUND(resolve("/info.php"));  // exists under the site root, not under this one
}

TEST_F(FastcgiResolveTest, StatResultsAreCachedForASecond) {
  EXPECT_NOT_FOUND(resolve("/late.php"));
  write("/late.php");
  clock_.monotonic_ms += 999;
  EXPECT_NOT_FOUND(resolve("/late.php"));  // still the cached answer
  clock_.monotonic_ms += 1;
  EXPECT_SCRIPT(resolve("/late.php"), "/late.php", "");
}

// ---------------------------------------------------------------------------------------------
// try_files: a front controller.

class FastcgiResolveTryFilesTest : public FastcgiResolveTest {
 protected:
  FastcgiResolveTryFilesTest() { fastcgi_->try_files = {"$uri", "$uri/", "/index.php?$args"}; }
};

TEST_F(FastcgiResolveTryFilesTest, ExistingStaticFileIsServed) {
  Target t = resolve("/style.css", "v=3");
  EXPECT_STATIC(t, "/style.css");
  EXPECT_EQ(t.query, "v=3");
  EXPECT_STATIC(resolve("/docs/readme.txt"), "/docs/readme.txt");
}

TEST_F(FastcgiResolveTryFilesTest, DirectoryGetsItsIndexThroughUriSlash) {
  fastcgi_->index = {"index.php", "index.html"};
  EXPECT_SCRIPT(resolve("/blog"), "/blog/index.php", "");
  EXPECT_SCRIPT(resolve("/blog/"), "/blog/index.php", "");
  EXPECT_STATIC(resolve("/shop"), "/shop/");
  EXPECT_SCRIPT(resolve("/"), "/index.php", "");
}

TEST_F(FastcgiResolveTryFilesTest, FallbackRunsTheFrontControllerWithTheQueryRewritten) {
  Target t = resolve("/some/pretty/url", "page=2&sort=asc");
  EXPECT_SCRIPT(t, "/index.php", "");
  EXPECT_EQ(t.query, "page=2&sort=asc");

  // A directory without an index falls through to the front controller too.
  t = resolve("/docs", "a=1");
  EXPECT_SCRIPT(t, "/index.php", "");
  EXPECT_EQ(t.query, "a=1");

  t = resolve("/nothing");
  EXPECT_SCRIPT(t, "/index.php", "");
  EXPECT_EQ(t.query, "");
}

TEST_F(FastcgiResolveTryFilesTest, FallbackWithUriAndArgsBuildsANewQuery) {
  fastcgi_->try_files = {"$uri", "/index.php?route=$uri&$args"};
  Target t = resolve("/blog/post/7", "draft=1");
  EXPECT_SCRIPT(t, "/index.php", "");
  EXPECT_EQ(t.query, "route=/blog/post/7&draft=1");
}

TEST_F(FastcgiResolveTryFilesTest, FallbackWithoutAQuestionMarkKeepsTheRequestQuery) {
  fastcgi_->try_files = {"$uri", "/index.php"};
  Target t = resolve("/pretty", "k=v");
  EXPECT_SCRIPT(t, "/index.php", "");
  EXPECT_EQ(t.query, "k=v");
}

TEST_F(FastcgiResolveTryFilesTest, FallbackWithPathInfo) {
  fastcgi_->try_files = {"$uri", "/index.php$uri?$args"};
  Target t = resolve("/a/b", "c=d");
  EXPECT_SCRIPT(t, "/index.php", "/a/b");
  EXPECT_EQ(t.query, "c=d");
}

TEST_F(FastcgiResolveTryFilesTest, FallbackToAMissingScriptIsNotFound) {
  fastcgi_->try_files = {"$uri", "/front.php?$args"};
  EXPECT_NOT_FOUND(resolve("/pretty"));
  fastcgi_->check_script = false;
  handler_.reset();
  EXPECT_SCRIPT(resolve("/pretty"), "/front.php", "");
}

TEST_F(FastcgiResolveTryFilesTest, FallbackToAStaticFile) {
  fastcgi_->try_files = {"$uri", "/fallback.html"};
  EXPECT_STATIC(resolve("/gone"), "/fallback.html");
}

TEST_F(FastcgiResolveTryFilesTest, Equals404Fallback) {
  fastcgi_->try_files = {"$uri", "$uri/", "=404"};
  EXPECT_NOT_FOUND(resolve("/nothing", "a=b"));
  EXPECT_NOT_FOUND(resolve("/docs"));
  EXPECT_STATIC(resolve("/style.css"), "/style.css");
  EXPECT_SCRIPT(resolve("/blog"), "/blog/index.php", "");
}

TEST_F(FastcgiResolveTryFilesTest, MissingScriptIsNotFoundNotTheFrontController) {
  EXPECT_NOT_FOUND(resolve("/x.php"));
  EXPECT_NOT_FOUND(resolve("/x.php/path/info"));
  EXPECT_NOT_FOUND(resolve("/sub/dir/x.php"));
}

TEST_F(FastcgiResolveTryFilesTest, ExistingScriptRunsWithItsPathInfo) {
  Target t = resolve("/info.php/extra", "z=9");
  EXPECT_SCRIPT(t, "/info.php", "/extra");
  EXPECT_EQ(t.query, "z=9");
  EXPECT_SCRIPT(resolve("/info.php"), "/info.php", "");
  EXPECT_SCRIPT(resolve("/info.php/controller/"), "/info.php", "/controller/");
}

TEST_F(FastcgiResolveTryFilesTest, ScriptFoundThroughACandidateRuns) {
  fastcgi_->try_files = {"$uri.php", "=404"};
  EXPECT_SCRIPT(resolve("/info"), "/info.php", "");
  EXPECT_NOT_FOUND(resolve("/nope"));
}

// A request path or query containing the literal text of a variable must not send the
// expansion round again (nor forever): "$" is a legal path and query character, and a client
// controls both. Run in a child with an alarm so a hang fails the test instead of the suite.
TEST_F(FastcgiResolveTryFilesTest, QueryContainingArgsIsExpandedOnce) {
  EXPECT_EXIT(
      {
        ::alarm(5);
        Target t = resolve("/pretty", "x=$args");
        std::_Exit(t.kind == Kind::kScript && t.query == "x=$args" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(FastcgiResolveTryFilesTest, PathContainingUriIsExpandedOnce) {
  EXPECT_EXIT(
      {
        ::alarm(5);
        Target t = resolve("/$uri");
        std::_Exit(t.kind == Kind::kScript && t.script_name == "/index.php" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------------------------
// A custom split_path.

TEST_F(FastcgiResolveTest, CustomSplitPathRegex) {
  set_split(R"(^(.+?\.cgi)(/.*)?$)");
  Target t = resolve("/app/run.cgi/a/b", "q=1");
  EXPECT_SCRIPT(t, "/app/run.cgi", "/a/b");
  EXPECT_EQ(t.query, "q=1");
  EXPECT_SCRIPT(resolve("/app/run.cgi"), "/app/run.cgi", "");
  EXPECT_NOT_FOUND(resolve("/app/missing.cgi/x"));
}

TEST_F(FastcgiResolveTest, CustomSplitPathDecidesWhatIsAScriptUnderTryFiles) {
  set_split(R"(^(.+\.cgi)(/.*)?$)");
  fastcgi_->try_files = {"$uri", "/app/run.cgi$uri?$args"};
  fastcgi_->index = {"run.cgi", "index.html"};
  // ".php" is no script name under this regex: an existing .php file is just a file.
  EXPECT_STATIC(resolve("/info.php"), "/info.php");
  EXPECT_NOT_FOUND(resolve("/app/gone.cgi"));
  Target t = resolve("/route/me", "k=v");
  EXPECT_SCRIPT(t, "/app/run.cgi", "/route/me");
  EXPECT_EQ(t.query, "k=v");
  fastcgi_->try_files = {"$uri", "$uri/", "=404"};
  handler_.reset();
  EXPECT_SCRIPT(resolve("/app"), "/app/run.cgi", "");  // an index that is a script
  EXPECT_STATIC(resolve("/shop"), "/shop/");
}

TEST_F(FastcgiResolveTest, CustomSplitPathWithAnEmptyScriptGroupDoesNotSplit) {
  set_split(R"(^(.*?\.cgi)?(/.*)$)");
  fastcgi_->try_files = {"$uri", "=404"};
  // The regex matches "/style.css" with an empty first group: not a script.
  EXPECT_STATIC(resolve("/style.css"), "/style.css");
  EXPECT_SCRIPT(resolve("/app/run.cgi/x"), "/app/run.cgi", "/x");
}

// ---------------------------------------------------------------------------------------------
// The default split_path, matched by hand, against pcre2 running the pattern.

TEST(FastcgiSplitDefault, AgreesWithTheDefaultPattern) {
  const std::shared_ptr<const Regex> regex = config::default_split_path();
  ASSERT_NE(regex, nullptr);
  int scripts = 0;
  auto check = [&](std::string_view uri) {
    Regex::Captures captures;
    const bool regex_matched = regex->match(uri, &captures);
    std::string_view script_name, path_info;
    const bool matched = split_default(uri, script_name, path_info);
    ASSERT_EQ(matched, regex_matched) << uri;
    if (!matched) return;
    ++scripts;
    EXPECT_EQ(script_name, captures.group[1]) << uri;
    EXPECT_EQ(path_info, captures.group[2]) << uri;
  };
  for (std::string_view uri : {"/index.php", "/a.php/b/c", "/.php", ".php", "x.php", "/a.phpx",
                               "/a.phpx/b.php/c", "/a.php.php", "/a.PHP", "/", ""})
    check(uri);
  // Paths of '/', '.', 'p', 'h', 'x' and whole ".php"s (written 'P'), so both answers are common.
  testing::for_random_inputs("/.phxP", 12, 100000, [&](std::string_view tokens) {
    std::string uri;
    for (char c : tokens) uri += c == 'P' ? std::string_view(".php") : std::string_view(&c, 1);
    check(uri);
  });
  EXPECT_GT(scripts, 10000);
}

}  // namespace
}  // namespace peregrine::fastcgi
