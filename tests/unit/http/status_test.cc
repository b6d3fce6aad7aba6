#include "http/status.h"

#include <gtest/gtest.h>

#include <string_view>
#include <utility>

namespace peregrine::http {
namespace {

TEST(ReasonPhrase, Rfc9110Codes) {
  const std::pair<int, std::string_view> cases[] = {
      {100, "Continue"},
      {101, "Switching Protocols"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {203, "Non-Authoritative Information"},
      {204, "No Content"},
      {205, "Reset Content"},
      {206, "Partial Content"},
      {300, "Multiple Choices"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {305, "Use Proxy"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {402, "Payment Required"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {407, "Proxy Authentication Required"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {412, "Precondition Failed"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {416, "Range Not Satisfiable"},
      {417, "Expectation Failed"},
      {421, "Misdirected Request"},
      {422, "Unprocessable Content"},
      {426, "Upgrade Required"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [code, phrase] : cases) EXPECT_EQ(reason_phrase(code), phrase) << code;
}

TEST(ReasonPhrase, OtherRegisteredCodes) {
  EXPECT_EQ(reason_phrase(103), "Early Hints");
  EXPECT_EQ(reason_phrase(425), "Too Early");
  EXPECT_EQ(reason_phrase(428), "Precondition Required");
  EXPECT_EQ(reason_phrase(429), "Too Many Requests");
  EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(reason_phrase(451), "Unavailable For Legal Reasons");
  EXPECT_EQ(reason_phrase(511), "Network Authentication Required");
}

TEST(ReasonPhrase, UnknownCodesGetClassNames) {
  EXPECT_EQ(reason_phrase(199), "Informational");
  EXPECT_EQ(reason_phrase(299), "Success");
  EXPECT_EQ(reason_phrase(399), "Redirection");
  EXPECT_EQ(reason_phrase(499), "Client Error");
  EXPECT_EQ(reason_phrase(599), "Server Error");
}

TEST(ReasonPhrase, OutOfRangeIsUnknown) {
  EXPECT_EQ(reason_phrase(0), "Unknown");
  EXPECT_EQ(reason_phrase(99), "Unknown");
  EXPECT_EQ(reason_phrase(600), "Unknown");
  EXPECT_EQ(reason_phrase(-200), "Unknown");
  EXPECT_EQ(reason_phrase(1000), "Unknown");
}

TEST(ReasonPhrase, NeverEmptyAndSafeForAStatusLine) {
  for (int code = -5; code < 1005; ++code) {
    const std::string_view p = reason_phrase(code);
    ASSERT_FALSE(p.empty()) << code;
    for (char c : p) {
      // reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
      ASSERT_TRUE(c == ' ' || c == '\t' || (c > 0x20 && c < 0x7f)) << code;
    }
  }
}

}  // namespace
}  // namespace peregrine::http
