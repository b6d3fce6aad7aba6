#include "http2/headers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peregrine::http2 {
namespace {

struct Built {
  int status;
  Request request;
};

RequestHeadBuilder& fill(
    RequestHeadBuilder& b,
    std::initializer_list<std::pair<std::string_view, std::string_view>> fields,
    bool* accepted = nullptr) {
  b.reset();
  bool ok = true;
  for (auto [name, value] : fields) ok = b.add(name, value) && ok;
  if (accepted) *accepted = ok;
  return b;
}

TEST(Http2RequestHead, BuildsTheRequestFromPseudoHeaders) {
  RequestHeadBuilder b;
  fill(b, {{":method", "GET"},
           {":scheme", "https"},
           {":authority", "example.com:8443"},
           {":path", "/a%20b/c?x=1&y=2"},
           {"user-agent", "t"}});
  Request r;
  ASSERT_EQ(b.finish(r, true), 0);
  EXPECT_EQ(r.method, Method::kGet);
  EXPECT_EQ(r.method_text, "GET");
  EXPECT_EQ(r.target, "/a%20b/c?x=1&y=2");
  EXPECT_EQ(r.raw_path, "/a%20b/c");
  EXPECT_EQ(r.query, "x=1&y=2");
  EXPECT_EQ(r.host, "example.com:8443");
  EXPECT_EQ(r.version_major, 2);
  EXPECT_FALSE(r.has_body());
  EXPECT_EQ(r.header("user-agent"), "t");
  EXPECT_EQ(r.header("Host"), "example.com:8443") << "a Host field is added for :authority";
}

TEST(Http2RequestHead, CookiesAreJoined) {
  RequestHeadBuilder b;
  fill(b, {{":method", "GET"},
           {":scheme", "http"},
           {":path", "/"},
           {"cookie", "a=1"},
           {"accept", "*/*"},
           {"cookie", "b=2"},
           {"cookie", "c=3"}});
  Request r;
  ASSERT_EQ(b.finish(r, true), 0);
  EXPECT_EQ(r.header("cookie"), "a=1; b=2; c=3");
  int cookies = 0;
  for (const Header& h : r.header_list()) cookies += h.name == "cookie";
  EXPECT_EQ(cookies, 1);
}

TEST(Http2RequestHead, BodyFraming) {
  RequestHeadBuilder b;
  Request r;
  fill(b, {{":method", "POST"}, {":scheme", "http"}, {":path", "/u"}, {"content-length", "42"}});
  ASSERT_EQ(b.finish(r, false), 0);
  EXPECT_EQ(r.content_length, 42);
  EXPECT_FALSE(r.chunked);
  fill(b, {{":method", "POST"}, {":scheme", "http"}, {":path", "/u"}});
  ASSERT_EQ(b.finish(r, false), 0);
  EXPECT_TRUE(r.chunked) << "no length and no END_STREAM: length unknown";
  EXPECT_TRUE(r.has_body());
  fill(b, {{":method", "POST"}, {":scheme", "http"}, {":path", "/u"}, {"content-length", "4"}});
  EXPECT_EQ(b.finish(r, true), 400) << "a length announced, END_STREAM on the HEADERS";
  fill(b, {{":method", "POST"}, {":scheme", "http"}, {":path", "/u"}, {"content-length", "4x"}});
  EXPECT_EQ(b.finish(r, false), 400);
  fill(b, {{":method", "POST"},
           {":scheme", "http"},
           {":path", "/u"},
           {"content-length", "4"},
           {"content-length", "5"}});
  EXPECT_EQ(b.finish(r, false), 400);
}

TEST(Http2RequestHead, RejectsMalformedPseudoHeaders) {
  RequestHeadBuilder b;
  bool ok = true;
  fill(b, {{":method", "GET"}, {":bogus", "x"}}, &ok);
  EXPECT_FALSE(ok) << "unknown pseudo-header";
  fill(b, {{":method", "GET"}, {":method", "GET"}}, &ok);
  EXPECT_FALSE(ok) << "repeated";
  fill(b, {{":method", "GET"}, {"accept", "x"}, {":path", "/"}}, &ok);
  EXPECT_FALSE(ok) << "pseudo-header after a regular field";
  fill(b, {{":status", "200"}}, &ok);
  EXPECT_FALSE(ok) << "a response pseudo-header";
  // Upper case and connection-specific fields are the session's to refuse (session_test.cc).

  Request r;
  fill(b, {{":method", "GET"}, {":scheme", "http"}});
  EXPECT_EQ(b.finish(r, true), 400) << "no :path";
  fill(b, {{":scheme", "http"}, {":path", "/"}});
  EXPECT_EQ(b.finish(r, true), 400) << "no :method";
  fill(b, {{":method", "GET"}, {":path", "/"}});
  EXPECT_EQ(b.finish(r, true), 400) << "no :scheme";
  fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "relative"}});
  EXPECT_EQ(b.finish(r, true), 400);
  fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "*"}});
  EXPECT_EQ(b.finish(r, true), 400) << "* is for OPTIONS only";
  fill(b, {{":method", "OPTIONS"}, {":scheme", "http"}, {":path", "*"}});
  EXPECT_EQ(b.finish(r, true), 0);
  fill(b, {{":method", "CONNECT"}, {":authority", "h:443"}});
  EXPECT_EQ(b.finish(r, true), 0);
  EXPECT_EQ(r.method, Method::kConnect);
  fill(b, {{":method", "CONNECT"}, {":authority", "h:443"}, {":path", "/"}});
  EXPECT_EQ(b.finish(r, true), 400);
}

// Issue 49: the pseudo-headers become an HTTP/1.1 request line and Host when proxied, so
// anything HTTP/1.1 would read differently is refused before a handler sees it.
TEST(Http2RequestHead, PseudoHeadersFollowHttp11Grammar) {
  RequestHeadBuilder b;
  Request r;
  const std::string_view bad_paths[] = {"/admin /ok",   "/ok HTTP/1.0", "/a\tb",   "/a\x7f",
                                        "/caf\xc3\xa9", "/a#frag",      "/a\x01b", "//x y"};
  for (std::string_view path : bad_paths) {
    fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", path}});
    EXPECT_EQ(b.finish(r, true), 400) << path;
  }
  const std::string_view bad_methods[] = {"GET /x", "G\tET", "GE(T", "", "GET\x80"};
  for (std::string_view method : bad_methods) {
    fill(b, {{":method", method}, {":scheme", "http"}, {":path", "/"}});
    EXPECT_EQ(b.finish(r, true), 400) << method;
  }
  const std::string_view bad_authorities[] = {
      "a.test x", "a.test/x",   "user@a.test", "a.test:99999", "a.test:8x", "",
      "[::1",     "a.test:1:2", "a\tb",        "a.test?x",     "%zz"};
  for (std::string_view authority : bad_authorities) {
    fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", authority}});
    EXPECT_EQ(b.finish(r, true), 400) << authority;
  }
  fill(b, {{":method", "GET"}, {":scheme", "ht tp"}, {":path", "/"}});
  EXPECT_EQ(b.finish(r, true), 400) << "scheme";
  fill(b, {{":method", "CONNECT"}, {":authority", "h"}});
  EXPECT_EQ(b.finish(r, true), 400) << "CONNECT names a port";

  const std::string_view good_authorities[] = {"a.test",    "A.Test:8443",       "127.0.0.1:80",
                                               "[::1]:443", "x-y_z~!$&'()*+,;=", "%41.test",
                                               "a.test:"};
  for (std::string_view authority : good_authorities) {
    fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", authority}});
    EXPECT_EQ(b.finish(r, true), 0) << authority;
  }
  fill(b, {{":method", "PROPFIND"}, {":scheme", "https"}, {":path", "/a/b?c=d&e=%20!$'()*+,;:@"}});
  EXPECT_EQ(b.finish(r, true), 0);
}

TEST(Http2RequestHead, AuthorityWinsOverHost) {
  RequestHeadBuilder b;
  Request r;
  auto hosts = [&r] {
    std::vector<std::string_view> out;
    for (const Header& h : r.header_list())
      if (h.name == "host") out.push_back(h.value);
    return out;
  };
  // RFC 9113 8.3.1: a host that names another authority is refused (as nginx does).
  fill(b, {{":method", "GET"},
           {":scheme", "http"},
           {":path", "/"},
           {":authority", "a.test"},
           {"host", "b.test"}});
  EXPECT_EQ(b.finish(r, true), 400);
  fill(b, {{":method", "GET"},
           {":scheme", "http"},
           {":path", "/"},
           {":authority", "a.test"},
           {"host", "a.test"},
           {"host", "b.test"}});
  EXPECT_EQ(b.finish(r, true), 400) << "a second host";
  fill(b, {{":method", "GET"},
           {":scheme", "http"},
           {":path", "/"},
           {":authority", "a.test"},
           {"host", "a.test:80"}});
  EXPECT_EQ(b.finish(r, true), 400) << "compared as sent, not normalized";
  // The same authority: one host field, :authority's.
  fill(b, {{":method", "GET"},
           {":scheme", "http"},
           {":path", "/"},
           {":authority", "a.test"},
           {"x-before", "1"},
           {"host", "A.TEST"}});
  ASSERT_EQ(b.finish(r, true), 0);
  EXPECT_EQ(r.host, "a.test");
  EXPECT_EQ(hosts(), (std::vector<std::string_view>{"a.test"}));
  EXPECT_EQ(r.header("x-before"), "1");
  // No :authority: the client's host is the authority, checked as HTTP/1.1 checks Host.
  fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"host", "b.test:8080"}});
  ASSERT_EQ(b.finish(r, true), 0);
  EXPECT_EQ(r.host, "b.test:8080");
  EXPECT_EQ(hosts(), (std::vector<std::string_view>{"b.test:8080"}));
  fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"host", "b.test/x"}});
  EXPECT_EQ(b.finish(r, true), 400);
  fill(b, {{":method", "GET"},
           {":scheme", "http"},
           {":path", "/"},
           {"host", "b.test"},
           {"host", "b.test"}});
  EXPECT_EQ(b.finish(r, true), 400) << "two hosts";
}

TEST(Http2RequestHead, HeaderListLimits) {
  RequestHeadBuilder b;
  b.set_max_list_bytes(200);
  std::string big(300, 'v');
  Request r;
  fill(b, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"x-big", big}});
  EXPECT_GT(b.list_bytes(), 300u);
  EXPECT_EQ(b.finish(r, true), 431);
  b.set_max_list_bytes(1 << 20);
  b.reset();
  b.add(":method", "GET");
  b.add(":scheme", "http");
  b.add(":path", "/");
  for (size_t i = 0; i < kMaxHeaders + 1; ++i) b.add("x-n", "1");
  EXPECT_EQ(b.finish(r, true), 431);
}

TEST(Http2RequestHead, UnknownMethodKeepsItsSpellingForTheRoute) {
  RequestHeadBuilder b;
  Request r;
  fill(b, {{":method", "BREW"}, {":scheme", "http"}, {":path", "/"}});
  ASSERT_EQ(b.finish(r, true), 0);
  EXPECT_EQ(r.method, Method::kUnknown);
  EXPECT_EQ(r.method_text, "BREW");
}

TEST(Http2ResponseFields, LowerCasesAndDropsConnectionFields) {
  ResponseFields f;
  f.add_lines(
      "Content-Type: text/html\r\nConnection: close\r\nKeep-Alive: timeout=5\r\n"
      "Transfer-Encoding: chunked\r\nUpgrade: websocket\r\nProxy-Connection: x\r\n"
      "X-Custom:  spaced value \r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f.name(0), "content-type");
  EXPECT_EQ(f.value(0), "text/html");
  EXPECT_EQ(f.name(1), "x-custom");
  EXPECT_EQ(f.value(1), "spaced value");
  EXPECT_EQ(f.name(2), "set-cookie");
  EXPECT_EQ(f.value(3), "b=2");
  f.clear();
  f.add("ETag", "\"x\"");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f.name(0), "etag");
}

// Names are lower-cased eight bytes at a time: every byte value, at every position of names
// from 1 to 19 bytes, against the one-byte rule.
TEST(Http2ResponseFields, LowerCasesEveryByteOfEveryLength) {
  ResponseFields f;
  for (size_t length = 1; length < 20; ++length) {
    for (size_t at = 0; at < length; ++at) {
      for (int c = 0; c < 256; ++c) {
        std::string name(length, 'Q');
        name[at] = static_cast<char>(c);
        std::string expected = name;
        for (char& e : expected)
          if (e >= 'A' && e <= 'Z') e = static_cast<char>(e + ('a' - 'A'));
        f.clear();
        f.add(name, "v");
        ASSERT_EQ(f.size(), 1u);
        ASSERT_EQ(f.name(0), expected) << length << " " << at << " " << c;
        ASSERT_EQ(f.value(0), "v");
      }
    }
  }
}

TEST(Http2ConnectionSpecific, Names) {
  for (std::string_view name : {"connection", "Keep-Alive", "proxy-connection", "transfer-encoding",
                                "upgrade", "te", "HTTP2-Settings"})
    EXPECT_TRUE(is_connection_specific(name)) << name;
  for (std::string_view name : {"host", "trailer", "x-upgrade", "settings"})
    EXPECT_FALSE(is_connection_specific(name)) << name;
}

TEST(Http2Method, Names) {
  EXPECT_EQ(method_from_text("GET"), Method::kGet);
  EXPECT_EQ(method_from_text("DELETE"), Method::kDelete);
  EXPECT_EQ(method_from_text("OPTIONS"), Method::kOptions);
  EXPECT_EQ(method_from_text("get"), Method::kUnknown);
}

}  // namespace
}  // namespace peregrine::http2
