#include "core/regex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace peregrine {
namespace {

std::shared_ptr<const Regex> must_compile(std::string_view pattern) {
  std::string error;
  size_t offset = 0;
  auto regex = Regex::compile(pattern, &error, &offset);
  EXPECT_NE(regex, nullptr) << pattern << ": " << error << " at " << offset;
  return regex;
}

TEST(Regex, MatchesAnywhereInTheSubject) {
  auto regex = must_compile("\\.php$");
  EXPECT_TRUE(regex->match("/index.php"));
  EXPECT_TRUE(regex->match("/a/b/c.php"));
  EXPECT_FALSE(regex->match("/index.php/extra"));
  EXPECT_FALSE(regex->match("/index.html"));
  EXPECT_EQ(regex->pattern(), "\\.php$");
}

TEST(Regex, AnchorsAreHonoured) {
  auto regex = must_compile("^/api/");
  EXPECT_TRUE(regex->match("/api/users"));
  EXPECT_FALSE(regex->match("/v1/api/users"));
}

TEST(Regex, CapturesAreViewsIntoTheSubject) {
  auto regex = must_compile("^/blog/([0-9]+)/(.*)$");
  std::string subject = "/blog/2024/hello-world";
  Regex::Captures captures;
  ASSERT_TRUE(regex->match(subject, &captures));
  EXPECT_EQ(captures.count, 3);
  EXPECT_EQ(captures.group[0], subject);
  EXPECT_EQ(captures.group[1], "2024");
  EXPECT_EQ(captures.group[2], "hello-world");
  // Views, not copies: they point into the subject's buffer.
  EXPECT_EQ(captures.group[1].data(), subject.data() + 6);
  EXPECT_EQ(captures.group[2].data(), subject.data() + 11);
}

TEST(Regex, UnsetGroupsAreEmpty) {
  auto regex = must_compile("^/(a)?(b)?(c)$");
  Regex::Captures captures;
  ASSERT_TRUE(regex->match("/bc", &captures));
  EXPECT_EQ(captures.count, 4);
  EXPECT_TRUE(captures.group[1].empty());
  EXPECT_EQ(captures.group[2], "b");
  EXPECT_EQ(captures.group[3], "c");
  EXPECT_TRUE(captures.group[4].empty());
}

TEST(Regex, FailedMatchResetsCaptures) {
  auto regex = must_compile("^/(x)$");
  Regex::Captures captures;
  ASSERT_TRUE(regex->match("/x", &captures));
  EXPECT_FALSE(regex->match("/y", &captures));
  EXPECT_EQ(captures.count, 0);
  EXPECT_TRUE(captures.group[1].empty());
}

TEST(Regex, MoreGroupsThanCaptureSlotsStillMatch) {
  auto regex = must_compile("^(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)$");
  Regex::Captures captures;
  ASSERT_TRUE(regex->match("abcdefghijkl", &captures));
  EXPECT_EQ(captures.count, Regex::kMaxCaptures);
  EXPECT_EQ(captures.group[9], "i");
}

TEST(Regex, CompileErrorReportsMessageAndOffset) {
  std::string error;
  size_t offset = 99;
  auto regex = Regex::compile("^/(unclosed", &error, &offset);
  EXPECT_EQ(regex, nullptr);
  EXPECT_NE(error.find("missing closing parenthesis"), std::string::npos) << error;
  EXPECT_EQ(offset, 11u);

  regex = Regex::compile("a{2,1}", &error, &offset);
  EXPECT_EQ(regex, nullptr);
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(offset, 5u);
}

TEST(Regex, CompileErrorWithoutOutParameters) {
  EXPECT_EQ(Regex::compile("(", nullptr, nullptr), nullptr);
  EXPECT_NE(Regex::compile("()", nullptr, nullptr), nullptr);
}

TEST(Regex, EmptySubjectAndEmptyPattern) {
  auto any = must_compile("");
  EXPECT_TRUE(any->match(""));
  EXPECT_TRUE(any->match(std::string_view()));
  auto slash = must_compile("^/$");
  EXPECT_FALSE(slash->match(std::string_view()));
}

TEST(Regex, ByteSemanticsAcceptInvalidUtf8AndNul) {
  auto regex = must_compile("^/f(.)o$");
  std::string subject =
      "/f\xff"
      "o";
  Regex::Captures captures;
  ASSERT_TRUE(regex->match(subject, &captures));
  EXPECT_EQ(captures.group[1], "\xff");
  std::string with_nul("/f\0o", 4);
  EXPECT_TRUE(regex->match(with_nul));
}

TEST(Regex, CatastrophicBacktrackingIsBounded) {
  auto regex = must_compile("^(a+)+$");
  std::string subject(40, 'a');
  subject += 'b';
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(regex->match(subject));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Regex, ConcurrentMatchesAreIndependent) {
  auto regex = must_compile("^/user/([0-9]+)/(\\w+)$");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        std::string id = std::to_string(t * 100000 + i);
        std::string name = "n" + std::to_string(t);
        std::string subject = "/user/" + id + "/" + name;
        Regex::Captures captures;
        if (!regex->match(subject, &captures) || captures.group[1] != id ||
            captures.group[2] != name) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace peregrine
