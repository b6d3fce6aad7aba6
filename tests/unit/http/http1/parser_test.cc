#include "http/http1/parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

namespace peregrine::http1 {
namespace {

using namespace std::string_literals;

class ParserTest : public ::testing::Test {
 protected:
  // Parses a copy of `s` kept alive in buf_, so the request's views stay valid.
  ParseResult Parse(std::string_view s, ParserLimits limits = {}) {
    RequestParser parser(limits);
    req_->clear();
    buf_.assign(s);
    return parser.parse(buf_, *req_);
  }
  // Expects an error with this status.
  void ExpectError(std::string_view s, int status, ParserLimits limits = {}) {
    ParseResult r = Parse(s, limits);
    EXPECT_EQ(r.status, ParseStatus::kError) << "input: " << s;
    EXPECT_EQ(r.error_status, status) << "input: " << s << " reason: " << r.error_reason;
    EXPECT_NE(std::string_view(r.error_reason), "");
  }
  // Expects kDone with the whole input as the head.
  void ExpectDone(std::string_view s, ParserLimits limits = {}) {
    ParseResult r = Parse(s, limits);
    ASSERT_EQ(r.status, ParseStatus::kDone) << "input: " << s << " reason: " << r.error_reason;
    EXPECT_EQ(r.head_length, s.size());
  }
  Request& req() { return *req_; }
  const std::string& buf() const { return buf_; }

  std::unique_ptr<Request> req_ = std::make_unique<Request>();
  std::string buf_;
};

constexpr std::string_view kWrkGet =
    "GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n";

// ---------------------------------------------------------------- accepted forms

TEST_F(ParserTest, SimpleGet) {
  ExpectDone(kWrkGet);
  EXPECT_EQ(req().method, Method::kGet);
  EXPECT_EQ(req().method_text, "GET");
  EXPECT_EQ(req().target, "/index.html");
  EXPECT_EQ(req().raw_path, "/index.html");
  EXPECT_EQ(req().query, "");
  EXPECT_EQ(req().authority, "");
  EXPECT_EQ(req().version_minor, 1);
  EXPECT_EQ(req().host, "127.0.0.1:8080");
  EXPECT_EQ(req().header_count, 3);
  EXPECT_EQ(req().headers[1].name, "User-Agent");
  EXPECT_EQ(req().headers[1].value, "wrk");
  EXPECT_EQ(req().content_length, -1);
  EXPECT_FALSE(req().chunked);
  EXPECT_TRUE(req().keep_alive);
  EXPECT_FALSE(req().expect_continue);
  EXPECT_FALSE(req().upgrade);
  EXPECT_FALSE(req().has_body());
}

TEST_F(ParserTest, ViewsPointIntoBuffer) {
  ExpectDone(kWrkGet);
  const char* b = buf().data();
  const char* e = b + buf().size();
  for (std::string_view v : {req().method_text, req().target, req().raw_path, req().host}) {
    EXPECT_GE(v.data(), b);
    EXPECT_LE(v.data() + v.size(), e);
  }
  for (const Header& h : req().header_list()) {
    EXPECT_GE(h.name.data(), b);
    EXPECT_LE(h.value.data() + h.value.size(), e);
  }
}

TEST_F(ParserTest, QueryIsSplitFromPath) {
  ExpectDone("GET /search?q=a%20b&x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().raw_path, "/search");
  EXPECT_EQ(req().query, "q=a%20b&x=1");
  EXPECT_EQ(req().target, "/search?q=a%20b&x=1");
}

TEST_F(ParserTest, EmptyQuery) {
  ExpectDone("GET /a? HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().raw_path, "/a");
  EXPECT_EQ(req().query, "");
  EXPECT_NE(req().query.data(), nullptr);  // present but empty
}

TEST_F(ParserTest, SecondQuestionMarkStaysInQuery) {
  ExpectDone("GET /a?b?c HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().raw_path, "/a");
  EXPECT_EQ(req().query, "b?c");
}

TEST_F(ParserTest, PathIsNotDecodedOrNormalized) {
  ExpectDone("GET /a/../b/%2e%2E/c%20d HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().raw_path, "/a/../b/%2e%2E/c%20d");
}

TEST_F(ParserTest, PostWithContentLength) {
  std::string s = "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
  ParseResult r = Parse(s + "hello world");
  ASSERT_EQ(r.status, ParseStatus::kDone);
  EXPECT_EQ(r.head_length, s.size());
  EXPECT_EQ(req().method, Method::kPost);
  EXPECT_EQ(req().content_length, 11);
  EXPECT_TRUE(req().has_body());
}

TEST_F(ParserTest, ContentLengthZero) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(req().content_length, 0);
  EXPECT_FALSE(req().has_body());
}

struct MethodCase {
  const char* text;
  Method method;
};

class MethodTest : public ParserTest, public ::testing::WithParamInterface<MethodCase> {};

TEST_P(MethodTest, KnownMethodsMap) {
  const MethodCase& c = GetParam();
  std::string s = std::string(c.text) + " /x HTTP/1.1\r\nHost: h\r\n\r\n";
  ExpectDone(s);
  EXPECT_EQ(req().method, c.method);
  EXPECT_EQ(req().method_text, c.text);
  EXPECT_EQ(method_name(c.method), c.text);
}

INSTANTIATE_TEST_SUITE_P(
    All, MethodTest,
    ::testing::Values(MethodCase{"GET", Method::kGet}, MethodCase{"HEAD", Method::kHead},
                      MethodCase{"POST", Method::kPost}, MethodCase{"PUT", Method::kPut},
                      MethodCase{"DELETE", Method::kDelete},
                      MethodCase{"OPTIONS", Method::kOptions}, MethodCase{"PATCH", Method::kPatch},
                      MethodCase{"TRACE", Method::kTrace}));

TEST_F(ParserTest, UnknownTokenMethodIsDoneWithUnknown) {
  ExpectDone("PROPFIND /dav HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().method, Method::kUnknown);
  EXPECT_EQ(req().method_text, "PROPFIND");
}

TEST_F(ParserTest, MethodIsCaseSensitive) {
  ExpectDone("get / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().method, Method::kUnknown);
  EXPECT_EQ(req().method_text, "get");
}

TEST_F(ParserTest, MethodWithTcharPunctuation) {
  ExpectDone("M-SEARCH! / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().method, Method::kUnknown);
  EXPECT_EQ(req().method_text, "M-SEARCH!");
}

TEST_F(ParserTest, MethodNameOfUnknown) {
  EXPECT_EQ(method_name(Method::kUnknown), "UNKNOWN");
}

TEST_F(ParserTest, Http10DefaultsToCloseAndNeedsNoHost) {
  ExpectDone("GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(req().version_minor, 0);
  EXPECT_FALSE(req().keep_alive);
  EXPECT_EQ(req().host, "");
}

TEST_F(ParserTest, Http10KeepAlive) {
  ExpectDone("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(req().keep_alive);
  EXPECT_EQ(req().host, "h");
}

TEST_F(ParserTest, Http11ConnectionClose) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(req().keep_alive);
}

TEST_F(ParserTest, ConnectionTokensAreCaseInsensitiveLists) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, ,CLOSE , bar\r\n\r\n");
  EXPECT_FALSE(req().keep_alive);
}

TEST_F(ParserTest, CloseWinsOverKeepAlive) {
  ExpectDone("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(req().keep_alive);
}

TEST_F(ParserTest, KeepAliveOnHttp11StaysKeepAlive) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_TRUE(req().keep_alive);
}

TEST_F(ParserTest, ConnectionUpgradeWithUpgradeHeader) {
  ExpectDone(
      "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n"
      "\r\n");
  EXPECT_TRUE(req().upgrade);
  EXPECT_TRUE(req().keep_alive);
}

TEST_F(ParserTest, ConnectionUpgradeWithoutUpgradeHeader) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n");
  EXPECT_FALSE(req().upgrade);
}

TEST_F(ParserTest, UpgradeHeaderWithoutConnectionToken) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\n\r\n");
  EXPECT_FALSE(req().upgrade);
}

TEST_F(ParserTest, LeadingEmptyLinesAreSkippedAndCounted) {
  std::string s = "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  ExpectDone(s);
  EXPECT_EQ(req().method_text, "GET");
  EXPECT_EQ(req().target, "/");
}

TEST_F(ParserTest, OnlyEmptyLinesNeedMore) {
  EXPECT_EQ(Parse("\r\n\r\n\r\n").status, ParseStatus::kNeedMore);
  EXPECT_EQ(Parse("\r\n\r").status, ParseStatus::kNeedMore);
}

TEST_F(ParserTest, HeaderValueWhitespaceIsTrimmed) {
  ExpectDone("GET / HTTP/1.1\r\nHost:h\r\nX-A: \t a b \t \r\nX-B:\t\tc\r\n\r\n");
  EXPECT_EQ(req().headers[0].value, "h");
  EXPECT_EQ(req().headers[1].value, "a b");
  EXPECT_EQ(req().headers[2].value, "c");
}

TEST_F(ParserTest, EmptyHeaderValue) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Spaces:   \r\n\r\n");
  EXPECT_EQ(req().headers[1].value, "");
  EXPECT_EQ(req().headers[2].value, "");
}

TEST_F(ParserTest, LongHeaderValueWithTabsAndObsText) {
  std::string value = "abc\tdef \xc3\xa9\xff long value with \x80 obs-text and\ttabs 0123456789";
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + value + "\r\n\r\n");
  EXPECT_EQ(req().headers[1].value, value);
}

TEST_F(ParserTest, HeaderLookupIsCaseInsensitive) {
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nX-A: 1\r\nx-a: 2\r\n\r\n");
  EXPECT_EQ(req().header("content-TYPE"), "text/plain");
  EXPECT_EQ(req().header("X-a"), "1");  // the first one
  EXPECT_EQ(req().header("Content-Length"), std::nullopt);
  EXPECT_EQ(req().header("Content-Typ"), std::nullopt);
}

TEST_F(ParserTest, HeaderNamesAreCaseInsensitiveForSemantics) {
  ExpectDone("POST / HTTP/1.1\r\nhOsT: h\r\ncontent-LENGTH: 3\r\nCONNECTION: CLOSE\r\n\r\n");
  EXPECT_EQ(req().host, "h");
  EXPECT_EQ(req().content_length, 3);
  EXPECT_FALSE(req().keep_alive);
}

TEST_F(ParserTest, AbsoluteFormHttp) {
  ExpectDone("GET http://example.com:8080/a/b?x=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
  EXPECT_EQ(req().authority, "example.com:8080");
  EXPECT_EQ(req().host, "example.com:8080");
  EXPECT_EQ(req().raw_path, "/a/b");
  EXPECT_EQ(req().query, "x=1");
  EXPECT_EQ(req().target, "http://example.com:8080/a/b?x=1");
}

TEST_F(ParserTest, AbsoluteFormHttpsCaseInsensitiveScheme) {
  ExpectDone("GET HTTPS://Example.COM/x HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_EQ(req().authority, "Example.COM");
  EXPECT_EQ(req().raw_path, "/x");
}

TEST_F(ParserTest, AbsoluteFormEmptyPathIsSlash) {
  std::string s = "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n";
  ExpectDone(s);
  EXPECT_EQ(req().raw_path, "/");
  EXPECT_GE(req().raw_path.data(), buf().data());  // still a view into the buffer
  EXPECT_LT(req().raw_path.data(), buf().data() + buf().size());
  EXPECT_EQ(req().authority, "h");
}

TEST_F(ParserTest, AbsoluteFormEmptyPathWithQuery) {
  ExpectDone("GET https://h:443?a=b HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().raw_path, "/");
  EXPECT_EQ(req().query, "a=b");
  EXPECT_EQ(req().authority, "h:443");
}

// RFC 9112 3.2.2: the field itself is replaced, since handlers and back ends read the field.
TEST_F(ParserTest, AbsoluteFormAuthorityReplacesHost) {
  ExpectDone("GET http://real.example/ HTTP/1.1\r\nX: 1\r\nHost: other.example\r\n\r\n");
  EXPECT_EQ(req().host, "real.example");
  EXPECT_EQ(req().header("Host"), "real.example");
  EXPECT_EQ(req().header_count, 2u);
}

TEST_F(ParserTest, AbsoluteFormHttp10WithoutHostGetsOne) {
  ExpectDone("GET http://h/p HTTP/1.0\r\nX: 1\r\n\r\n");
  EXPECT_EQ(req().host, "h");
  EXPECT_EQ(req().header("Host"), "h");
  EXPECT_EQ(req().header_count, 2u);
}

TEST_F(ParserTest, AbsoluteFormIpv6) {
  ExpectDone("GET http://[::1]:8080/p HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
  EXPECT_EQ(req().authority, "[::1]:8080");
  EXPECT_EQ(req().raw_path, "/p");
}

TEST_F(ParserTest, AsteriskFormWithOptions) {
  ExpectDone("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(req().method, Method::kOptions);
  EXPECT_EQ(req().target, "*");
  EXPECT_EQ(req().raw_path, "*");
}

TEST_F(ParserTest, ConnectAuthorityForm) {
  ExpectDone("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
  EXPECT_EQ(req().method, Method::kConnect);
  EXPECT_EQ(req().authority, "example.com:443");
  EXPECT_EQ(req().raw_path, "");
}

TEST_F(ParserTest, HostForms) {
  for (const char* host :
       {"h", "example.com", "example.com:80", "127.0.0.1", "[::1]", "[2001:db8::7]:443",
        "xn--bcher-kva.example", "a_b~c.d", "h:", "%41.example"}) {
    ExpectDone("GET / HTTP/1.1\r\nHost: "s + host + "\r\n\r\n");
    EXPECT_EQ(req().host, host);
  }
}

TEST_F(ParserTest, EmptyHostIsAccepted) {
  // RFC 9112 3.2: a client sends an empty Host when the target URI has no authority.
  ExpectDone("GET / HTTP/1.1\r\nHost:\r\n\r\n");
  EXPECT_EQ(req().host, "");
}

TEST_F(ParserTest, ExpectContinueCaseInsensitive) {
  ExpectDone("PUT /f HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-Continue\r\n\r\n");
  EXPECT_TRUE(req().expect_continue);
}

TEST_F(ParserTest, ExpectContinueIgnoredInHttp10) {
  ExpectDone("PUT /f HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_FALSE(req().expect_continue);
}

TEST_F(ParserTest, ContentLengthRepeatedIdentical) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\nContent-Length: 42\r\n\r\n");
  EXPECT_EQ(req().content_length, 42);
}

TEST_F(ParserTest, ContentLengthIdenticalList) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7 ,7,  7\r\n\r\n");
  EXPECT_EQ(req().content_length, 7);
}

TEST_F(ParserTest, ContentLengthLeadingZeros) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0007\r\n\r\n");
  EXPECT_EQ(req().content_length, 7);
}

TEST_F(ParserTest, ContentLengthAtLimit) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4611686018427387904\r\n\r\n");
  EXPECT_EQ(req().content_length, int64_t{1} << 62);
}

TEST_F(ParserTest, TransferEncodingChunked) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n");
  EXPECT_TRUE(req().chunked);
  EXPECT_EQ(req().content_length, -1);
  EXPECT_TRUE(req().has_body());
}

TEST_F(ParserTest, TransferEncodingChunkedWithEmptyListElements) {
  ExpectDone("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: , chunked ,\r\n\r\n");
  EXPECT_TRUE(req().chunked);
}

TEST_F(ParserTest, ExactlyMaxHeadersAccepted) {
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (size_t i = 1; i < kMaxHeaders; ++i) s += "X-" + std::to_string(i) + ": v\r\n";
  s += "\r\n";
  ExpectDone(s);
  EXPECT_EQ(req().header_count, kMaxHeaders);
}

TEST_F(ParserTest, HeadOfExactlyMaxHeadBytesAccepted) {
  ParserLimits lim;
  lim.max_head_bytes = 256;
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
  s += std::string(lim.max_head_bytes - s.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(s.size(), lim.max_head_bytes);
  ExpectDone(s, lim);
}

TEST_F(ParserTest, TargetOfExactlyMaxTargetBytesAccepted) {
  ParserLimits lim;
  lim.max_target_bytes = 100;
  std::string target = "/" + std::string(99, 'x');
  ExpectDone("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n", lim);
  EXPECT_EQ(req().target.size(), 100u);
}

TEST_F(ParserTest, BodyBytesAfterHeadAreNotExamined) {
  std::string head = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\n";
  ParseResult r = Parse(head + "\n\0\r\x01\xff\n"s);
  ASSERT_EQ(r.status, ParseStatus::kDone);
  EXPECT_EQ(r.head_length, head.size());
}

// The value, target and line scanners work 8 or 16 bytes at a time; these walk a special byte
// across every position of a word to check the boundaries.
TEST_F(ParserTest, ControlCharacterAtEveryValuePosition) {
  for (size_t i = 0; i < 40; ++i) {
    std::string value(40, 'v');
    value[i] = '\x01';
    ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: " + value + "\r\n\r\n", 400);
    value[i] = '\x7f';
    ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: " + value + "\r\n\r\n", 400);
  }
}

TEST_F(ParserTest, TabAtEveryInnerValuePosition) {
  for (size_t i = 1; i < 39; ++i) {
    std::string value(40, 'v');
    value[i] = '\t';
    ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nX: " + value + "\r\n\r\n");
    EXPECT_EQ(req().headers[1].value, value);
  }
}

TEST_F(ParserTest, InvalidTargetByteAtEveryPosition) {
  for (size_t i = 1; i < 40; ++i) {
    for (char c : {'\x7f', '\x80', '\xff', '\x1f', '#'}) {
      std::string target = "/" + std::string(39, 'p');
      target[i] = c;
      ExpectError("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    }
  }
}

TEST_F(ParserTest, QuestionMarkAtEveryPosition) {
  for (size_t i = 1; i < 40; ++i) {
    std::string target = "/" + std::string(39, 'p');
    target[i] = '?';
    ExpectDone("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(req().raw_path, target.substr(0, i));
    EXPECT_EQ(req().query, target.substr(i + 1));
  }
}

TEST_F(ParserTest, BareLfAtEveryLineEnd) {
  const std::string good =
      "GET /a HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\nAccept: */*\r\n\r\n";
  for (size_t i = 0; i < good.size(); ++i) {
    if (good[i] != '\r') continue;
    std::string bad = good;
    bad.erase(i, 1);
    ExpectError(bad, 400);
  }
}

// ---------------------------------------------------------------- incomplete input

TEST_F(ParserTest, IncompleteHeadsNeedMore) {
  std::string s(kWrkGet);
  for (size_t n = 0; n < s.size(); ++n) {
    EXPECT_EQ(Parse(std::string_view(s).substr(0, n)).status, ParseStatus::kNeedMore) << n;
  }
}

TEST_F(ParserTest, NeedMoreLeavesRequestUntouched) {
  req().method_text = "sentinel";
  RequestParser p;
  EXPECT_EQ(p.parse("GET / HTTP/1.1\r\nHost:", req()).status, ParseStatus::kNeedMore);
  EXPECT_EQ(req().method_text, "sentinel");
}

// ---------------------------------------------------------------- resumption and pipelining

// Feeds `s` one byte more at a time to one parser and returns the final result.
ParseResult ParseByteAtATime(std::string_view s, Request& req, ParserLimits lim = {}) {
  RequestParser p(lim);
  ParseResult r;
  for (size_t n = 0; n <= s.size(); ++n) {
    r = p.parse(s.substr(0, n), req);
    if (r.status != ParseStatus::kNeedMore) return r;
  }
  return r;
}

TEST_F(ParserTest, ByteAtATimeEqualsOneShot) {
  const std::string inputs[] = {
      std::string(kWrkGet),
      "\r\n\r\nPOST /u?x=y HTTP/1.1\r\nHost: a:1\r\nTransfer-Encoding: chunked\r\n"
      "Connection: upgrade, close\r\nUpgrade: x\r\nExpect: 100-continue\r\n\r\nBODY",
      "GET http://h/x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
  };
  for (const std::string& s : inputs) {
    Request one, many;
    RequestParser p;
    ParseResult a = p.parse(s, one);
    ParseResult b = ParseByteAtATime(s, many);
    ASSERT_EQ(a.status, ParseStatus::kDone) << a.error_reason;
    ASSERT_EQ(b.status, ParseStatus::kDone);
    EXPECT_EQ(a.head_length, b.head_length);
    EXPECT_EQ(one.method_text.data(), many.method_text.data());
    EXPECT_EQ(one.target, many.target);
    EXPECT_EQ(one.query, many.query);
    EXPECT_EQ(one.host, many.host);
    EXPECT_EQ(one.header_count, many.header_count);
    EXPECT_EQ(one.chunked, many.chunked);
    EXPECT_EQ(one.keep_alive, many.keep_alive);
    EXPECT_EQ(one.upgrade, many.upgrade);
    EXPECT_EQ(one.expect_continue, many.expect_continue);
  }
}

TEST_F(ParserTest, ByteAtATimeErrorsEqualOneShot) {
  const std::string inputs[] = {
      "GET / HTTP/1.1\nHost: h\r\n\r\n",
      "GET / HTTP/2.0\r\nHost: h\r\n\r\n",
      "GET / HTTP/1.1\r\nHost : h\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
      "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
      "\r\n\nGET / HTTP/1.1\r\n\r\n",
  };
  for (const std::string& s : inputs) {
    Request one, many;
    RequestParser p;
    ParseResult a = p.parse(s, one);
    ParseResult b = ParseByteAtATime(s, many);
    ASSERT_EQ(a.status, ParseStatus::kError) << s;
    EXPECT_EQ(b.status, ParseStatus::kError) << s;
    EXPECT_EQ(a.error_status, b.error_status) << s;
  }
}

TEST_F(ParserTest, SplitAtEveryPositionEqualsOneShot) {
  std::string s =
      "\r\nPUT /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\nX: y\r\n\r\nabc";
  Request one;
  RequestParser p1;
  ParseResult a = p1.parse(s, one);
  ASSERT_EQ(a.status, ParseStatus::kDone);
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    Request two;
    RequestParser p2;
    ParseResult b = p2.parse(std::string_view(s).substr(0, cut), two);
    if (b.status == ParseStatus::kNeedMore) b = p2.parse(s, two);
    ASSERT_EQ(b.status, ParseStatus::kDone) << cut;
    EXPECT_EQ(b.head_length, a.head_length);
    EXPECT_EQ(two.raw_path.data(), one.raw_path.data());
    EXPECT_EQ(two.content_length, 3);
  }
}

TEST_F(ParserTest, ResumeAfterBufferMoved) {
  // The connection may compact or grow its buffer between calls; only offsets are remembered.
  std::string first = "GET /moved HTTP/1.1\r\nHo";
  RequestParser p;
  EXPECT_EQ(p.parse(first, req()).status, ParseStatus::kNeedMore);
  std::string grown = first + "st: h\r\n\r\n";
  grown.reserve(4096);
  ParseResult r = p.parse(grown, req());
  ASSERT_EQ(r.status, ParseStatus::kDone);
  EXPECT_EQ(req().target, "/moved");
  EXPECT_EQ(req().host, "h");
}

TEST_F(ParserTest, PipelinedRequests) {
  std::string s =
      "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
      "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
      "\r\nGET /3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  std::string_view rest = s;
  RequestParser p;
  const char* paths[] = {"/1", "/2", "/3"};
  for (int i = 0; i < 3; ++i) {
    req().clear();
    ParseResult r = p.parse(rest, req());
    ASSERT_EQ(r.status, ParseStatus::kDone) << i;
    EXPECT_EQ(req().raw_path, paths[i]);
    rest.remove_prefix(r.head_length);
    if (req().content_length > 0) rest.remove_prefix(static_cast<size_t>(req().content_length));
    p.reset();
  }
  EXPECT_TRUE(rest.empty());
  EXPECT_FALSE(req().keep_alive);
}

TEST_F(ParserTest, PipelinedSecondRequestIncomplete) {
  std::string s = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHo";
  RequestParser p;
  ParseResult r = p.parse(s, req());
  ASSERT_EQ(r.status, ParseStatus::kDone);
  p.reset();
  EXPECT_EQ(p.parse(std::string_view(s).substr(r.head_length), req()).status,
            ParseStatus::kNeedMore);
}

TEST_F(ParserTest, ParserIsReusableWithoutExplicitReset) {
  RequestParser p;
  std::string a = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
  std::string b = "GET /bb HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(p.parse(a, req()).status, ParseStatus::kDone);
  ASSERT_EQ(p.parse(b, req()).status, ParseStatus::kDone);
  EXPECT_EQ(req().raw_path, "/bb");
}

TEST_F(ParserTest, ClearResetsParsedFields) {
  ExpectDone("POST /x?y HTTP/1.0\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
  req().path_storage.reserve(1000);
  req().path_storage = "/x";
  req().path = req().path_storage;
  size_t cap = req().path_storage.capacity();
  req().clear();
  EXPECT_EQ(req().method, Method::kUnknown);
  EXPECT_EQ(req().target, "");
  EXPECT_EQ(req().query, "");
  EXPECT_EQ(req().header_count, 0);
  EXPECT_EQ(req().host, "");
  EXPECT_EQ(req().content_length, -1);
  EXPECT_TRUE(req().keep_alive);
  EXPECT_EQ(req().version_minor, 1);
  EXPECT_EQ(req().path, "");
  EXPECT_TRUE(req().path_storage.empty());
  EXPECT_EQ(req().path_storage.capacity(), cap);
  EXPECT_EQ(req().header("Host"), std::nullopt);
}

// ---------------------------------------------------------------- rejected: request line

TEST_F(ParserTest, InvalidMethodCharacter) {
  ExpectError("G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, EmptyMethod) {
  ExpectError(" / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, DoubleSpaceAfterMethod) {
  ExpectError("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, DoubleSpaceBeforeVersion) {
  ExpectError("GET /  HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, TabAsSeparator) {
  ExpectError("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, TrailingSpaceAfterVersion) {
  ExpectError("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, MissingVersion) {
  ExpectError("GET /\r\n\r\n", 400);
}
TEST_F(ParserTest, MissingTarget) {
  ExpectError("GET HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, SpaceInsideTarget) {
  ExpectError("GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, RequestLineOnlyMethod) {
  ExpectError("GET\r\n\r\n", 400);
}

// An upgrade is only one we might take: h2c alone is not (HTTP/2 over cleartext is by prior
// knowledge only), so such a request is an ordinary one and its Upgrade a hop-by-hop field.
TEST_F(ParserTest, UpgradeToH2cAloneIsNoUpgrade) {
  ExpectDone(
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n"
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n");
  EXPECT_FALSE(req().upgrade);
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: h2c, websocket\r\n\r\n");
  EXPECT_TRUE(req().upgrade);
  ExpectDone("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_TRUE(req().upgrade);
}

TEST_F(ParserTest, UnsupportedWellFormedVersionsAre505) {
  for (const char* v : {"HTTP/2.0", "HTTP/0.9", "HTTP/3.0", "HTTP/9.1"}) {
    ExpectError("GET / "s + v + "\r\nHost: h\r\n\r\n", 505);
  }
}

// RFC 9110 2.5: a higher minor version of 1 is processed as HTTP/1.1 (Apache's http_strict
// probe; HTTP/1.1 rules apply, so Host is required and keep-alive is the default).
TEST_F(ParserTest, HigherMinorVersionIsProcessedAs11) {
  for (const char* v : {"HTTP/1.2", "HTTP/1.9"}) {
    ExpectDone("GET / "s + v + "\r\nHost: h\r\n\r\n");
    EXPECT_EQ(req().version_minor, 1);
    EXPECT_TRUE(req().keep_alive);
    ExpectError("GET / "s + v + "\r\n\r\n", 400);
  }
}

TEST_F(ParserTest, MalformedVersionsAre400) {
  for (const char* v : {"http/1.1", "HTTP/1.10", "HTTP/11.1", "HTTP/1", "HTTP/1.", "HTTP 1.1",
                        "HTTP/1.1x", "HTTPS/1.1", "HTTP/a.b", "HTTP/1,1"}) {
    ExpectError("GET / "s + v + "\r\nHost: h\r\n\r\n", 400);
  }
}

TEST_F(ParserTest, H2PrefaceIs505) {
  ExpectError("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505);
}

TEST_F(ParserTest, TargetWithNonAsciiByte) {
  ExpectError("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, TargetWithControlCharacters) {
  for (char c : {'\0', '\x01', '\t', '\x1f', '\x7f'}) {
    std::string s = "GET /a";
    s += c;
    ExpectError(s + "b HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  }
}
TEST_F(ParserTest, TargetWithNonAsciiInQuery) {
  ExpectError("GET /a?\x80 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, TargetWithFragment) {
  ExpectError("GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  ExpectError("GET /a?q#frag HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, RelativeTarget) {
  ExpectError("GET index.html HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AsteriskWithGet) {
  ExpectError("GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AsteriskWithSuffix) {
  ExpectError("OPTIONS *x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, ConnectWithOriginForm) {
  ExpectError("CONNECT / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, ConnectWithoutPort) {
  ExpectError("CONNECT example.com HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, ConnectWithAbsoluteForm) {
  ExpectError("CONNECT http://example.com:443/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AuthorityFormWithGet) {
  ExpectError("GET example.com:80 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AbsoluteFormOtherScheme) {
  ExpectError("GET ftp://h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  ExpectError("GET httpx://h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  ExpectError("GET http:/h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AbsoluteFormWithUserinfo) {
  ExpectError("GET http://user:pw@h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AbsoluteFormEmptyHost) {
  ExpectError("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  ExpectError("GET http://?x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  ExpectError("GET http:// HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, AbsoluteFormBadPort) {
  ExpectError("GET http://h:99999/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  ExpectError("GET http://h:8a/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

// ---------------------------------------------------------------- rejected: line endings

TEST_F(ParserTest, BareLfInRequestLine) {
  ExpectError("GET / HTTP/1.1\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, BareLfEndingHead) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\n\n", 400);
}
TEST_F(ParserTest, BareLfBetweenHeaders) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: 1\nY: 2\r\n\r\n", 400);
}
TEST_F(ParserTest, BareLfLeadingLine) {
  ExpectError("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, BareLfReportedBeforeHeadCompletes) {
  // No need to wait for CRLF CRLF once a bare LF has been seen.
  ExpectError("GET / HTTP/1.1\nHost", 400);
}
TEST_F(ParserTest, BareCrInHeaderValue) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", 400);
}
TEST_F(ParserTest, BareCrInRequestLine) {
  ExpectError("GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}
TEST_F(ParserTest, BareCrLeading) {
  ExpectError("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

// ---------------------------------------------------------------- rejected: header fields

TEST_F(ParserTest, ObsoleteLineFolding) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400);
}
TEST_F(ParserTest, FirstHeaderLineFolded) {
  ExpectError("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
}
TEST_F(ParserTest, WhitespaceBeforeColon) {
  ExpectError("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nContent-Length : 5\r\n\r\n", 400);
}
TEST_F(ParserTest, EmptyHeaderName) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400);
}
TEST_F(ParserTest, InvalidHeaderNameCharacters) {
  for (const char* name : {"X(a)", "X/Y", "X@", "X\"", "X\x80", "X[1]", "X{", "X=Y"}) {
    ExpectError("GET / HTTP/1.1\r\nHost: h\r\n"s + name + ": v\r\n\r\n", 400);
  }
}
TEST_F(ParserTest, HeaderLineWithoutColon) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nNoColonHere\r\n\r\n", 400);
}
TEST_F(ParserTest, NulInHeaderValue) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n"s, 400);
}
TEST_F(ParserTest, ControlCharactersInHeaderValue) {
  for (char c : {'\x01', '\x08', '\x0b', '\x0c', '\x1b', '\x7f'}) {
    std::string s = "GET / HTTP/1.1\r\nHost: h\r\nX: 0123456789abcdef";
    s += c;
    ExpectError(s + "tail\r\n\r\n", 400);
  }
}
TEST_F(ParserTest, TooManyHeaders) {
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (size_t i = 0; i < kMaxHeaders; ++i) s += "X-" + std::to_string(i) + ": v\r\n";
  ExpectError(s + "\r\n", 431);
}

// ---------------------------------------------------------------- rejected: limits

TEST_F(ParserTest, TargetTooLong) {
  ParserLimits lim;
  lim.max_target_bytes = 100;
  ExpectError("GET /" + std::string(100, 'x') + " HTTP/1.1\r\nHost: h\r\n\r\n", 414, lim);
}

TEST_F(ParserTest, TargetTooLongDefaultLimits) {
  ExpectError("GET /" + std::string(8192, 'x') + " HTTP/1.1\r\nHost: h\r\n\r\n", 414);
}

TEST_F(ParserTest, IncompleteRequestLineTooLongIs414) {
  // No CRLF yet, and already more than the target limit plus room for method and version.
  std::string s = "GET /" + std::string(8192 + 100, 'x');
  ExpectError(s, 414);
  // Just under: still waiting.
  EXPECT_EQ(Parse("GET /" + std::string(8192, 'x')).status, ParseStatus::kNeedMore);
}

TEST_F(ParserTest, IncompleteHeadOverLimitIs431) {
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(16384, 'a');
  ExpectError(s, 431);
}

TEST_F(ParserTest, CompleteHeadOverLimitIs431) {
  ParserLimits lim;
  lim.max_head_bytes = 256;
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
  s += std::string(lim.max_head_bytes - s.size() - 3, 'a') + "\r\n\r\n";
  ASSERT_EQ(s.size(), lim.max_head_bytes + 1);
  ExpectError(s, 431, lim);
}

TEST_F(ParserTest, OverLimitWithLongCompleteRequestLineIs414) {
  ParserLimits lim;
  lim.max_head_bytes = 1024;
  lim.max_target_bytes = 512;
  std::string s = "GET /" + std::string(600, 'x') + " HTTP/1.1\r\nX: " + std::string(600, 'y');
  ExpectError(s, 414, lim);
}

TEST_F(ParserTest, RequestLineLongerThanHeadLimitIs414) {
  ParserLimits lim;
  lim.max_head_bytes = 128;
  lim.max_target_bytes = 8192;
  ExpectError("GET /" + std::string(200, 'x'), 414, lim);
}

TEST_F(ParserTest, LimitErrorReportedAsSoonAsExceeded) {
  // Fed byte by byte, the parser answers at the first byte past the limit, never kNeedMore.
  ParserLimits lim;
  lim.max_head_bytes = 200;
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(300, 'a');
  RequestParser p(lim);
  for (size_t n = 0; n <= s.size(); ++n) {
    ParseResult r = p.parse(std::string_view(s).substr(0, n), req());
    if (n <= lim.max_head_bytes) {
      ASSERT_EQ(r.status, ParseStatus::kNeedMore) << n;
    } else {
      ASSERT_EQ(r.status, ParseStatus::kError) << n;
      EXPECT_EQ(r.error_status, 431);
      break;
    }
  }
}

TEST_F(ParserTest, TooManyLeadingEmptyLinesIs431) {
  std::string s;
  for (int i = 0; i < 9000; ++i) s += "\r\n";
  ExpectError(s, 431);
}

// ---------------------------------------------------------------- rejected: Host

TEST_F(ParserTest, MissingHostInHttp11) {
  ExpectError("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400);
}
TEST_F(ParserTest, MissingHostWithAbsoluteForm) {
  ExpectError("GET http://h/ HTTP/1.1\r\n\r\n", 400);
}
TEST_F(ParserTest, DuplicateHost) {
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400);
}
TEST_F(ParserTest, InvalidHostValues) {
  for (const char* host : {"a b", "a/b", "user@h", "h:80:80", "h:port", "[::1", "[]", "h:123456",
                           "h:65536", "a\\b", "a%zz", "a%4", ":80", "h?x", "h#x", "\"h\""}) {
    ExpectError("GET / HTTP/1.1\r\nHost: "s + host + "\r\n\r\n", 400);
  }
}

// ---------------------------------------------------------------- rejected: Content-Length

TEST_F(ParserTest, ContentLengthNotDigits) {
  for (const char* v :
       {"abc", "-1", "+5", "5a", "0x10", "1 2", "1.0", "", ",", "5,", ",5", "5,,5"}) {
    ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: "s + v + "\r\n\r\n", 400);
  }
}
TEST_F(ParserTest, ContentLengthConflictingHeaders) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400);
}
TEST_F(ParserTest, ContentLengthConflictingList) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n", 400);
}
TEST_F(ParserTest, ContentLengthOverflow) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4611686018427387905\r\n\r\n", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400);
}

// ---------------------------------------------------------------- rejected: Transfer-Encoding

TEST_F(ParserTest, UnknownTransferCodingIs501) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n", 501);
}
TEST_F(ParserTest, ChunkedNotLastIs501) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 501);
  ExpectError(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n",
      501);
}
TEST_F(ParserTest, ChunkedTwice) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400);
}
TEST_F(ParserTest, TransferEncodingWithContentLength) {
  ExpectError(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
  ExpectError(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400);
}
TEST_F(ParserTest, TransferEncodingInHttp10) {
  ExpectError("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
}
TEST_F(ParserTest, TransferEncodingEmptyOrMalformed) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chun ked\r\n\r\n", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;a=b\r\n\r\n", 400);
}

// ---------------------------------------------------------------- rejected: Expect, Connection

TEST_F(ParserTest, UnknownExpectationIs417) {
  ExpectError("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", 417);
  ExpectError("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, foo\r\n\r\n", 417);
}
TEST_F(ParserTest, FramingErrorWinsOverExpectation) {
  ExpectError("PUT / HTTP/1.1\r\nHost: h\r\nExpect: nope\r\nContent-Length: x\r\n\r\n", 400);
}
TEST_F(ParserTest, MalformedConnection) {
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive close\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nConnection: close;x=1\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nConnection: (close)\r\n\r\n", 400);
}

TEST_F(ParserTest, ErrorResetsParser) {
  RequestParser p;
  ParseResult r = p.parse("GET / HTTP/1.1\nHost: h\r\n\r\n", req());
  ASSERT_EQ(r.status, ParseStatus::kError);
  r = p.parse("GET /ok HTTP/1.1\r\nHost: h\r\n\r\n", req());
  ASSERT_EQ(r.status, ParseStatus::kDone);
  EXPECT_EQ(req().raw_path, "/ok");
}

}  // namespace
}  // namespace peregrine::http1
