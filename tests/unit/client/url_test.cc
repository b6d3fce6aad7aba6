#include "client/url.h"

#include <gtest/gtest.h>

namespace peregrine::client {
namespace {

Url parse_ok(std::string_view text) {
  std::string error;
  std::optional<Url> url = parse_url(text, &error);
  EXPECT_TRUE(url) << text << ": " << error;
  return url.value_or(Url{});
}

std::string parse_error(std::string_view text) {
  std::string error;
  std::optional<Url> url = parse_url(text, &error);
  EXPECT_FALSE(url) << text;
  EXPECT_FALSE(error.empty()) << text;
  return error;
}

TEST(ClientUrl, HttpWithDefaults) {
  Url url = parse_ok("http://example.com");
  EXPECT_FALSE(url.tls);
  EXPECT_EQ(url.host, "example.com");
  EXPECT_EQ(url.port, 80);
  EXPECT_EQ(url.authority, "example.com");
  EXPECT_EQ(url.path, "/");
  EXPECT_EQ(url.query, "");
  EXPECT_EQ(url.address(), "example.com:80");
}

TEST(ClientUrl, HttpsPortPathQuery) {
  Url url = parse_ok("HTTPS://api.example.com:8443/v1/a%20b?x=1&y=%2F#frag");
  EXPECT_TRUE(url.tls);
  EXPECT_EQ(url.port, 8443);
  EXPECT_EQ(url.authority, "api.example.com:8443");
  EXPECT_EQ(url.path, "/v1/a%20b");
  EXPECT_EQ(url.query, "x=1&y=%2F");
}

TEST(ClientUrl, DefaultPortWrittenIsLeftOutOfTheAuthority) {
  EXPECT_EQ(parse_ok("https://h:443/").authority, "h");
  EXPECT_EQ(parse_ok("http://h:80").authority, "h");
  EXPECT_EQ(parse_ok("http://h:443").authority, "h:443");
}

TEST(ClientUrl, QueryWithoutPath) {
  Url url = parse_ok("http://127.0.0.1:9000?a=b");
  EXPECT_EQ(url.path, "/");
  EXPECT_EQ(url.query, "a=b");
  EXPECT_EQ(url.address(), "127.0.0.1:9000");
}

TEST(ClientUrl, Ipv6Literal) {
  Url url = parse_ok("http://[::1]:8080/x");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.authority, "[::1]:8080");
  EXPECT_EQ(url.address(), "[::1]:8080");
  EXPECT_EQ(parse_ok("https://[2001:db8::2]").address(), "[2001:db8::2]:443");
}

TEST(ClientUrl, Refusals) {
  EXPECT_NE(parse_error("example.com/x").find("absolute"), std::string::npos);
  EXPECT_NE(parse_error("ftp://example.com/").find("scheme"), std::string::npos);
  EXPECT_NE(parse_error("http:///x").find("missing host"), std::string::npos);
  EXPECT_NE(parse_error("http://user:pw@h/").find("credentials"), std::string::npos);
  EXPECT_NE(parse_error("http://h:0/").find("port"), std::string::npos);
  EXPECT_NE(parse_error("http://h:65536/").find("port"), std::string::npos);
  EXPECT_NE(parse_error("http://h:8x/").find("port"), std::string::npos);
  EXPECT_NE(parse_error("http://h:/").find("port"), std::string::npos);
  EXPECT_NE(parse_error("http://[::1/").find("IPv6"), std::string::npos);
  EXPECT_NE(parse_error("http://[::1]x/").find("IPv6"), std::string::npos);
  EXPECT_NE(parse_error("http://[fe80::1%eth0]/").find("IPv6"), std::string::npos);
  EXPECT_NE(parse_error("http://h st/").find("host"), std::string::npos);
}

TEST(ClientUrl, NothingThatCouldSplitTheRequestLine) {
  for (std::string_view bad : std::initializer_list<std::string_view>{
           "http://h/a b", "http://h/a\r\nX: y", "http://h/\x7f", "http://h/?q=\"x\"",
           "http://h/a{b}", std::string_view("http://h/\0", 10)})
    EXPECT_NE(parse_error(bad).find("invalid character"), std::string::npos) << bad;
}

}  // namespace
}  // namespace peregrine::client
