// htpasswd files (src/auth/htpasswd.h): parsing, each hash kind against vectors made with
// `openssl passwd -apr1/-5/-6`, `htpasswd -m/-B` and libxcrypt's yescrypt (python3 crypt),
// refused kinds, and basic credentials (src/auth/basic.h) with the per-worker cache.
#include "auth/htpasswd.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "auth/basic.h"

namespace peregrine::auth {
namespace {

// openssl passwd -apr1 -salt abcdefgh secret, and so on.
constexpr const char* kApr1 = "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/";
constexpr const char* kApr1Htpasswd = "$apr1$qTfiE5qZ$vOLdJqAfTKCorPrMHYPyp/";  // htpasswd -m
constexpr const char* kBcrypt4 = "$2y$04$9gO80HZGerJqaR1rVkpgRumUjyPRp8An4Dt/2dId6Y2czkfGnviay";
constexpr const char* kBcrypt10 = "$2y$10$w.uqk5kU4urL2.Fa.K4vHe3NA1hu7z5R7qQRT6hU8mgzp5ohIPmVO";
constexpr const char* kBcrypt12 = "$2b$12$5pqgJx4SoJncq/YZ9Ox0Rum4aoA3Mc9GxQGD5um0EoLAxkHpT4pkC";
constexpr const char* kSha512 =
    "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq."
    "H91p5hVO1";
constexpr const char* kSha256 = "$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA";
constexpr const char* kYescrypt =
    "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$GmcwIgvdUC9qLWcKCi6gklUa1dM3ziD43YxYNURLKy0";

bool verifies(std::string_view hash, std::string_view password) {
  HashKind kind;
  EXPECT_TRUE(hash_kind(hash, &kind)) << hash;
  return verify_hash(hash, kind, password);
}

TEST(Apr1, MatchesOpensslVectors) {
  EXPECT_EQ(apr1_crypt("secret", "abcdefgh"), kApr1);
  EXPECT_EQ(apr1_crypt("pässword with spaces and a long tail beyond sixteen bytes", "Xy1"),
            "$apr1$Xy1$O3WhwW1lyMQt3Lx25.G8c/");
  EXPECT_EQ(apr1_crypt("", "z"), "$apr1$z$.gLCGOUAsBYRHNmHjndlB/");
  // The salt stops at '$' and at 8 characters, as when it is read from a stored hash.
  EXPECT_EQ(apr1_crypt("secret", "abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"), kApr1);
}

TEST(VerifyHash, EachKindAcceptsItsPasswordOnly) {
  struct Case {
    const char* hash;
    const char* password;
  };
  for (Case c : {Case{kApr1, "secret"}, Case{kApr1Htpasswd, "secret"}, Case{kBcrypt4, "hunter2"},
                 Case{kBcrypt10, "c0rrect horse"}, Case{kSha512, "secret"}, Case{kSha256, "secret"},
                 Case{kYescrypt, "secret"}}) {
    EXPECT_TRUE(verifies(c.hash, c.password)) << c.hash;
    EXPECT_FALSE(verifies(c.hash, std::string(c.password) + "x")) << c.hash;
    EXPECT_FALSE(verifies(c.hash, "")) << c.hash;
    EXPECT_FALSE(verifies(c.hash, std::string(c.password) + std::string("\0", 1))) << c.hash;
  }
}

TEST(VerifyHash, AMangledHashNeverMatches) {
  std::string broken = kBcrypt4;
  broken.resize(20);
  EXPECT_FALSE(verifies(broken, "hunter2"));
  EXPECT_FALSE(verifies("$6$", "secret"));
  EXPECT_FALSE(verifies("$apr1$", ""));
}

TEST(Htpasswd, ParsesEntriesCommentsAndCrlf) {
  std::vector<HtpasswdProblem> problems;
  Htpasswd file =
      Htpasswd::parse(std::string("# staff\r\nalice:") + kApr1 + "\r\n\nbob:" + kBcrypt4 +
                          "\ncarol:" + kYescrypt + ":extra field\n",
                      &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(file.size(), 3u);
  ASSERT_NE(file.find("bob"), nullptr);
  EXPECT_EQ(file.find("bob")->kind, HashKind::kBcrypt);
  EXPECT_EQ(file.find("carol")->hash, kYescrypt);
  EXPECT_EQ(file.find("Bob"), nullptr) << "user names are case-sensitive";
  ASSERT_NE(file.verify("alice", "secret"), nullptr);
  EXPECT_EQ(file.verify("alice", "secret")->user, "alice");
  EXPECT_EQ(file.verify("alice", "hunter2"), nullptr);
  EXPECT_EQ(file.verify("bob", "secret"), nullptr);
  EXPECT_EQ(file.verify("nobody", "secret"), nullptr);
}

TEST(Htpasswd, RefusesWeakHashesAndBadLines) {
  std::vector<HtpasswdProblem> problems;
  Htpasswd::parse(
      "plain:secret\nsha:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\nnocolon\n:nouser\nmd5:$1$abc$def\n"
      "dup:" +
          std::string(kApr1) + "\ndup:" + kApr1 + "\nempty:\n",
      &problems);
  ASSERT_EQ(problems.size(), 7u);
  EXPECT_EQ(problems[0].line, 1u);
  EXPECT_EQ(problems[0].column, 7u);
  EXPECT_NE(problems[0].message.find("plaintext"), std::string::npos);
  EXPECT_NE(problems[0].hint.find("htpasswd -B"), std::string::npos);
  EXPECT_NE(problems[1].message.find("{SHA}"), std::string::npos);
  EXPECT_EQ(problems[2].line, 3u);
  EXPECT_EQ(problems[3].line, 4u);
  EXPECT_NE(problems[4].message.find("$1$"), std::string::npos);
  EXPECT_EQ(problems[5].line, 7u);
  EXPECT_NE(problems[5].message.find("twice"), std::string::npos);
  EXPECT_NE(problems[6].message.find("empty"), std::string::npos);
}

TEST(ParseBasic, Forms) {
  std::string storage;
  std::string_view user, password;
  // "alice:sec:ret" — the password may hold colons; the user may not.
  ASSERT_TRUE(parse_basic("Basic YWxpY2U6c2VjOnJldA==", storage, &user, &password));
  EXPECT_EQ(user, "alice");
  EXPECT_EQ(password, "sec:ret");
  EXPECT_TRUE(parse_basic("basic   YWxpY2U6  ", storage, &user, &password));  // "alice:"
  EXPECT_EQ(password, "");
  EXPECT_FALSE(parse_basic("Bearer YWxpY2U6c2VjcmV0", storage, &user, &password));
  EXPECT_FALSE(parse_basic("Basic", storage, &user, &password));
  EXPECT_FALSE(parse_basic("Basic ", storage, &user, &password));
  EXPECT_FALSE(parse_basic("Basic YWxpY2U", storage, &user, &password)) << "no padding";
  EXPECT_FALSE(parse_basic("Basic YWxp*2U6", storage, &user, &password)) << "not base64";
  EXPECT_FALSE(parse_basic("Basic YW=pY2U6", storage, &user, &password)) << "inner padding";
  EXPECT_FALSE(parse_basic("Basic YWxpY2U=", storage, &user, &password)) << "no colon";
  EXPECT_FALSE(parse_basic("Basic OnNlY3JldA==", storage, &user, &password)) << "no user";
  EXPECT_FALSE(parse_basic("Basic " + std::string(2000, 'A'), storage, &user, &password));
}

class BasicAuthTest : public ::testing::Test {
 protected:
  BasicAuthTest() {
    std::vector<HtpasswdProblem> problems;
    users_ = Htpasswd::parse(std::string("bob:") + kBcrypt4 + "\nalice:" + kApr1 + "\n", &problems);
  }
  Request& with(std::string_view authorization) {
    request_.clear();
    request_.headers[0] = {"Authorization", authorization};
    request_.header_count = authorization.empty() ? 0 : 1;
    return request_;
  }
  Clock clock_;
  Htpasswd users_;
  Request request_;
};

TEST_F(BasicAuthTest, AcceptsCachesAndExpires) {
  BasicAuth auth(clock_);
  clock_.monotonic_ms = 1000;
  EXPECT_EQ(auth.check(users_, with("Basic Ym9iOmh1bnRlcjI=")), "bob");  // bob:hunter2
  EXPECT_EQ(auth.verifications(), 1u);
  EXPECT_EQ(auth.check(users_, with("Basic Ym9iOmh1bnRlcjI=")), "bob");
  EXPECT_EQ(auth.verifications(), 1u) << "the second request hits the cache";
  clock_.monotonic_ms += BasicAuth::kCacheMs;
  EXPECT_EQ(auth.check(users_, with("Basic Ym9iOmh1bnRlcjI=")), "bob");
  EXPECT_EQ(auth.verifications(), 2u) << "expired: verified again";
}

TEST_F(BasicAuthTest, RefusesWrongMissingAndMalformed) {
  BasicAuth auth(clock_);
  EXPECT_EQ(auth.check(users_, with("")), "");
  EXPECT_EQ(auth.check(users_, with("Basic Ym9iOndyb25n")), "");  // bob:wrong
  EXPECT_EQ(auth.check(users_, with("Basic Ym9iOndyb25n")), "") << "failures are not cached";
  EXPECT_EQ(auth.verifications(), 2u);
  EXPECT_EQ(auth.check(users_, with("Basic !!!")), "");
  EXPECT_EQ(auth.check(users_, with("Digest username=\"bob\"")), "");
  EXPECT_EQ(auth.verifications(), 2u) << "malformed credentials cost no verification";
  EXPECT_EQ(auth.check(users_, with("Basic YWxpY2U6c2VjcmV0")), "alice");
  EXPECT_EQ(auth.cached(), 1u);
}

TEST_F(BasicAuthTest, CacheIsBounded) {
  BasicAuth auth(clock_);
  // Distinct header values for the same credentials: trailing spaces are ignored by the parser.
  std::string value = "Basic YWxpY2U6c2VjcmV0";
  for (size_t i = 0; i < BasicAuth::kCacheEntries + 10; ++i) {
    EXPECT_EQ(auth.check(users_, with(value)), "alice");
    value += ' ';
  }
  EXPECT_LE(auth.cached(), BasicAuth::kCacheEntries);
}

// What one verification costs, by kind (printed; the figures are in docs/access.md).
TEST(VerifyCost, PerKind) {
  struct Case {
    const char* name;
    const char* hash;
    const char* password;
    int rounds;
  };
  for (Case c :
       {Case{"bcrypt cost 10", kBcrypt10, "c0rrect horse", 10},
        Case{"bcrypt cost 12", kBcrypt12, "secret", 3},
        Case{"sha512-crypt (5000 rounds)", kSha512, "secret", 50},
        Case{"yescrypt (j9T)", kYescrypt, "secret", 10}, Case{"apr1-md5", kApr1, "secret", 200}}) {
    // CPU time of this thread, not wall time: the figure holds on a busy machine too.
    auto cpu_ms = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    };
    const double start = cpu_ms();
    for (int i = 0; i < c.rounds; ++i) EXPECT_TRUE(verifies(c.hash, c.password)) << c.name;
    const double ms = (cpu_ms() - start) / c.rounds;
    std::printf("[ cost     ] %-28s %8.3f ms CPU per verification\n", c.name, ms);
  }
}

}  // namespace
}  // namespace peregrine::auth
