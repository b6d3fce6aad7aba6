#include "http/path.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

namespace peregrine::http {
namespace {

// Normalizes and returns the result, or "<400>" for kBadRequest.
std::string norm(std::string_view raw) {
  std::string out;
  return normalize_path(raw, out) == PathStatus::kOk ? out : std::string("<400>");
}

TEST(NormalizePath, PlainPathsAreUnchanged) {
  EXPECT_EQ(norm("/"), "/");
  EXPECT_EQ(norm("/index.html"), "/index.html");
  EXPECT_EQ(norm("/a/b/c.txt"), "/a/b/c.txt");
  EXPECT_EQ(norm("/a/b/"), "/a/b/");
}

TEST(NormalizePath, RequiresLeadingSlash) {
  EXPECT_EQ(norm(""), "<400>");
  EXPECT_EQ(norm("a/b"), "<400>");
  EXPECT_EQ(norm("*"), "<400>");
  EXPECT_EQ(norm("http://example.com/"), "<400>");
  EXPECT_EQ(norm("%2Fa"), "<400>");  // the leading slash must be literal
}

TEST(NormalizePath, RemovesDotSegments) {
  EXPECT_EQ(norm("/a/./b/../c"), "/a/c");
  EXPECT_EQ(norm("/./a"), "/a");
  EXPECT_EQ(norm("/a/."), "/a/");
  EXPECT_EQ(norm("/a/b/.."), "/a/");
  EXPECT_EQ(norm("/a/b/../"), "/a/");
  EXPECT_EQ(norm("/a/.."), "/");
  EXPECT_EQ(norm("/."), "/");
  EXPECT_EQ(norm("/a/b/c/./../../g"), "/a/g");
  EXPECT_EQ(norm("/mid/content=5/../6"), "/mid/6");
}

TEST(NormalizePath, KeepsSegmentsThatOnlyLookLikeDots) {
  EXPECT_EQ(norm("/a/..b"), "/a/..b");
  EXPECT_EQ(norm("/a/b.."), "/a/b..");
  EXPECT_EQ(norm("/a/.../b"), "/a/.../b");
  EXPECT_EQ(norm("/.hidden"), "/.hidden");
  EXPECT_EQ(norm("/a/.b/"), "/a/.b/");
}

TEST(NormalizePath, CollapsesRepeatedSlashes) {
  EXPECT_EQ(norm("//a///b"), "/a/b");
  EXPECT_EQ(norm("//"), "/");
  EXPECT_EQ(norm("/a//"), "/a/");
  EXPECT_EQ(norm("/a//..//b"), "/b");
  EXPECT_EQ(norm("/a/.//./b"), "/a/b");
}

TEST(NormalizePath, ClimbingAboveRootIsRejected) {
  EXPECT_EQ(norm("/.."), "<400>");
  EXPECT_EQ(norm("/../"), "<400>");
  EXPECT_EQ(norm("/../etc/passwd"), "<400>");
  EXPECT_EQ(norm("/a/../../etc/passwd"), "<400>");
  EXPECT_EQ(norm("/a/b/../../.."), "<400>");
  EXPECT_EQ(norm("/./../x"), "<400>");
  EXPECT_EQ(norm("//../x"), "<400>");
  EXPECT_EQ(norm("/a/./../.."), "<400>");
}

TEST(NormalizePath, ClimbingToRootExactlyIsFine) {
  EXPECT_EQ(norm("/a/b/../../"), "/");
  EXPECT_EQ(norm("/a/b/../../c"), "/c");
}

TEST(NormalizePath, PercentDecodes) {
  EXPECT_EQ(norm("/a%20b"), "/a b");
  EXPECT_EQ(norm("/%41%42%43"), "/ABC");
  EXPECT_EQ(norm("/%7e%7E"), "/~~");
  EXPECT_EQ(norm("/caf%C3%A9"), "/caf\xC3\xA9");
  EXPECT_EQ(norm("/100%25"), "/100%");
  EXPECT_EQ(norm("/%3F%23"), "/?#");
}

TEST(NormalizePath, InvalidPercentEscapesAreRejected) {
  EXPECT_EQ(norm("/%"), "<400>");
  EXPECT_EQ(norm("/%4"), "<400>");
  EXPECT_EQ(norm("/a%"), "<400>");
  EXPECT_EQ(norm("/%G0"), "<400>");
  EXPECT_EQ(norm("/%0G"), "<400>");
  EXPECT_EQ(norm("/%%41"), "<400>");
  EXPECT_EQ(norm("/% 1"), "<400>");
  EXPECT_EQ(norm("/%-1"), "<400>");
}

TEST(NormalizePath, NulIsRejected) {
  EXPECT_EQ(norm("/a%00b"), "<400>");
  EXPECT_EQ(norm("/a%00"), "<400>");
  EXPECT_EQ(norm(std::string_view("/a\0b", 4)), "<400>");
}

TEST(NormalizePath, EncodedDotsAreDotSegments) {
  EXPECT_EQ(norm("/a/%2e/b"), "/a/b");
  EXPECT_EQ(norm("/a/b/%2e%2e/c"), "/a/c");
  EXPECT_EQ(norm("/a/.%2E/c"), "/c");
  EXPECT_EQ(norm("/%2e%2e/etc/passwd"), "<400>");
  EXPECT_EQ(norm("/%2E%2E%2Fetc"), "<400>");
  EXPECT_EQ(norm("/.%2e/x"), "<400>");
}

TEST(NormalizePath, EncodedSlashesTakePartInNormalization) {
  EXPECT_EQ(norm("/a%2Fb"), "/a/b");
  EXPECT_EQ(norm("/a%2F..%2F..%2Fetc"), "<400>");
  EXPECT_EQ(norm("/a%2Fb%2F..%2Fc"), "/a/c");
  EXPECT_EQ(norm("/a%2f%2f%2fb"), "/a/b");
  EXPECT_EQ(norm("/x/..%2f..%2fetc/passwd"), "<400>");
}

TEST(NormalizePath, DoubleEncodingIsDecodedOnlyOnce) {
  EXPECT_EQ(norm("/%252e%252e/etc"), "/%2e%2e/etc");
  EXPECT_EQ(norm("/a/%252E%252E/b"), "/a/%2E%2E/b");
  EXPECT_EQ(norm("/%252F"), "/%2F");
  EXPECT_EQ(norm("/%25%32%65"), "/%2e");
}

TEST(NormalizePath, BackslashIsLiteral) {
  EXPECT_EQ(norm("/a\\..\\b"), "/a\\..\\b");
  EXPECT_EQ(norm("/..\\x"), "/..\\x");
  EXPECT_EQ(norm("/%5C..%5Cetc"), "/\\..\\etc");
}

TEST(NormalizePath, MixedTraversalAttempts) {
  EXPECT_EQ(norm("/static/../../../../etc/shadow"), "<400>");
  EXPECT_EQ(norm("/static/%2e./%2e%2e/secret"), "<400>");
  EXPECT_EQ(norm("/static//..//..//x"), "<400>");
  EXPECT_EQ(norm("/static/./.././x"), "/x");
  EXPECT_EQ(norm("/a/b/c/%2E%2e/%2e./../d"), "/d");
}

TEST(NormalizePath, ReusesOutputWithoutGrowing) {
  std::string out;
  out.reserve(64);
  const char* data = out.data();
  ASSERT_EQ(normalize_path("/first/path", out), PathStatus::kOk);
  ASSERT_EQ(normalize_path("/a/./b", out), PathStatus::kOk);
  EXPECT_EQ(out, "/a/b");
  EXPECT_EQ(out.data(), data);
  out = "garbage";
  ASSERT_EQ(normalize_path("/x", out), PathStatus::kOk);
  EXPECT_EQ(out, "/x");
}

TEST(PathHasDotSegmentStart, Detects) {
  EXPECT_TRUE(path_has_dot_segment_start("/.git/config"));
  EXPECT_TRUE(path_has_dot_segment_start("/a/.env"));
  EXPECT_TRUE(path_has_dot_segment_start("/a/.b/c"));
  EXPECT_TRUE(path_has_dot_segment_start("/.well-known/x"));
  EXPECT_FALSE(path_has_dot_segment_start("/"));
  EXPECT_FALSE(path_has_dot_segment_start("/a.b/c.d"));
  EXPECT_FALSE(path_has_dot_segment_start("/index.html"));
  EXPECT_FALSE(path_has_dot_segment_start(""));
}

TEST(PathIsWellKnown, PrefixOnly) {
  EXPECT_TRUE(path_is_well_known("/.well-known/acme-challenge/token"));
  EXPECT_TRUE(path_is_well_known("/.well-known/"));
  EXPECT_TRUE(path_is_well_known("/.well-known"));
  EXPECT_FALSE(path_is_well_known("/.well-knownx"));
  EXPECT_FALSE(path_is_well_known("/.well-known-x/a"));
  EXPECT_FALSE(path_is_well_known("/a/.well-known/x"));
  EXPECT_FALSE(path_is_well_known("/.Well-Known/x"));
  EXPECT_FALSE(path_is_well_known("/"));
}

TEST(PathShouldDenyDotfile, WellKnownExemptButNotItsDotfiles) {
  EXPECT_TRUE(path_should_deny_dotfile("/.env"));
  EXPECT_TRUE(path_should_deny_dotfile("/app/.git/HEAD"));
  EXPECT_TRUE(path_should_deny_dotfile("/.well-known/.htpasswd"));
  EXPECT_TRUE(path_should_deny_dotfile("/.well-knownx"));
  EXPECT_FALSE(path_should_deny_dotfile("/.well-known/acme-challenge/abc"));
  EXPECT_FALSE(path_should_deny_dotfile("/.well-known"));
  EXPECT_FALSE(path_should_deny_dotfile("/a/b.c"));
}

TEST(ExtensionOf, Cases) {
  EXPECT_EQ(extension_of("/a/b.html"), "html");
  EXPECT_EQ(extension_of("/a/b.tar.gz"), "gz");
  EXPECT_EQ(extension_of("/X.HTML"), "HTML");
  EXPECT_EQ(extension_of("/.bashrc"), "");
  EXPECT_EQ(extension_of("/.config.json"), "json");
  EXPECT_EQ(extension_of("/a.d/file"), "");
  EXPECT_EQ(extension_of("/a.d/"), "");
  EXPECT_EQ(extension_of("/file."), "");
  EXPECT_EQ(extension_of("/"), "");
  EXPECT_EQ(extension_of(""), "");
  EXPECT_EQ(extension_of("name.txt"), "txt");
  EXPECT_EQ(extension_of("/..."), "");
}

}  // namespace
}  // namespace peregrine::http

namespace peregrine::http {
namespace {

// Random paths over an alphabet rich in separators, dots and escapes. The input sits in an exact-
// size heap block so a sanitizer build catches any read past its end.
TEST(NormalizePath, RandomInputsKeepTheInvariants) {
  constexpr char kAlphabet[] = "/./.%2e%2E%2f%2F%00a\\%";
  uint64_t x = 88172645463325252ull;
  std::string out;
  for (int iter = 0; iter < 50000; ++iter) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const size_t len = x % 24;
    std::unique_ptr<char[]> buf(new char[len + 1]);
    buf[0] = '/';
    uint64_t y = x;
    for (size_t i = 1; i <= len; ++i) {
      y = y * 6364136223846793005ull + 1442695040888963407ull;
      buf[i] = kAlphabet[(y >> 33) % (sizeof(kAlphabet) - 1)];
    }
    const std::string_view raw(buf.get(), len + 1);
    if (normalize_path(raw, out) != PathStatus::kOk) continue;
    ASSERT_FALSE(out.empty()) << raw;
    ASSERT_EQ(out[0], '/') << raw;
    ASSERT_EQ(out.find("//"), std::string::npos) << raw << " -> " << out;
    ASSERT_EQ(out.find("/./"), std::string::npos) << raw << " -> " << out;
    ASSERT_EQ(out.find("/../"), std::string::npos) << raw << " -> " << out;
    ASSERT_FALSE(out.ends_with("/.") || out.ends_with("/..")) << raw << " -> " << out;
    ASSERT_EQ(out.find('\0'), std::string::npos) << raw;
    ASSERT_LE(out.size(), raw.size());
    // Idempotent once '%' is not present (a literal '%' would be decoded again).
    if (out.find('%') == std::string::npos) {
      std::string again;
      ASSERT_EQ(normalize_path(out, again), PathStatus::kOk) << out;
      ASSERT_EQ(again, out);
    }
  }
}

}  // namespace
}  // namespace peregrine::http

namespace peregrine::http {
namespace {

// path_is_normal must agree with normalize_path: true only where normalizing changes nothing.
TEST(PathIsNormal, AgreesWithNormalizePath) {
  const char* samples[] = {"/",      "/a",       "/a/b.txt", "/a/",     "/a//b",    "//",
                           "/.",     "/..",      "/a/./b",   "/a/../b", "/.env",    "/a/.git/x",
                           "/%41",   "/a%2Fb",   "a",        "",        "/a.b/c.d", "/a/b..",
                           "/a/..b", "/~user/x", "/a\\..\\b"};
  std::string out;
  for (const char* raw : samples) {
    std::string_view v(raw);
    bool normal = path_is_normal(v);
    if (normal) {
      ASSERT_EQ(normalize_path(v, out), PathStatus::kOk) << raw;
      EXPECT_EQ(out, v) << raw;
    }
  }
  EXPECT_TRUE(path_is_normal("/a/b.txt"));
  EXPECT_FALSE(path_is_normal("/a/../b"));
  EXPECT_FALSE(path_is_normal("/%2e%2e/x"));
  EXPECT_FALSE(path_is_normal("//x"));
  EXPECT_FALSE(path_is_normal("/.env"));
  EXPECT_FALSE(path_is_normal("x"));
}

TEST(PercentDecode, QueryValuesAndSegments) {
  EXPECT_EQ(percent_decode("unix:%2Frun%2Fa.sock", false), "unix:/run/a.sock");
  EXPECT_EQ(percent_decode("a+b%20c", true), "a b c");
  EXPECT_EQ(percent_decode("a+b", false), "a+b");
  EXPECT_EQ(percent_decode("", false), "");
  EXPECT_FALSE(percent_decode("%", false));
  EXPECT_FALSE(percent_decode("x%4", false));
  EXPECT_FALSE(percent_decode("%g1", false));
}

}  // namespace
}  // namespace peregrine::http
