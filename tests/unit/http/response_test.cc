#include "peregrine/response.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine {
namespace {

TEST(ResponseHeaders, AddsNameAndValueAsOneLine) {
  Response r;
  EXPECT_TRUE(r.add_header("X-Test", "yes"));
  r.set_content_type("text/plain; charset=utf-8");
  EXPECT_EQ(r.extra_headers(), "X-Test: yes\r\nContent-Type: text/plain; charset=utf-8\r\n");
}

TEST(ResponseHeaders, LongLinesToo) {
  Response r;
  const std::string value(1000, 'v');
  EXPECT_TRUE(r.add_header("X-Long", value));
  EXPECT_EQ(r.extra_headers(), "X-Long: " + value + "\r\n");
}

TEST(ResponseHeaders, RefusesNamesThatAreNotTokens) {
  Response r;
  EXPECT_FALSE(r.add_header("", "v"));
  EXPECT_FALSE(r.add_header("Bad Name", "v"));
  EXPECT_FALSE(r.add_header("Bad:Name", "v"));
  EXPECT_EQ(r.extra_headers(), "");
}

// A CR, LF or NUL anywhere in the value (at every offset, so in each position of the eight-byte
// words the check reads, and in the tail) refuses the whole header; other control characters
// and bytes above 0x7f do not.
TEST(ResponseHeaders, RefusesLineBreaksAtEveryOffset) {
  for (char bad : {'\r', '\n', '\0'}) {
    for (size_t length = 1; length <= 24; ++length) {
      for (size_t at = 0; at < length; ++at) {
        std::string value(length, 'a');
        value[at] = bad;
        Response r;
        EXPECT_FALSE(r.add_header("X", value)) << int(bad) << " at " << at << " of " << length;
        r.set_content_type(value);
        EXPECT_EQ(r.extra_headers(), "");
      }
    }
  }
  Response r;
  EXPECT_TRUE(r.add_header("X", std::string("\t\x01\x1f\x7f\x80\xff tab-and-high", 19)));
}

}  // namespace
}  // namespace peregrine
