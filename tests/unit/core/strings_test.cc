#include "core/strings.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine {
namespace {

// Checks token_is against `lower` in both cases, with each byte changed in turn, and with a
// byte too few or too many.
template <size_t N>
void ExpectEveryByteCounts(const char (&lower)[N]) {
  const std::string exact(lower, N - 1);
  std::string upper = exact;
  for (char& c : upper)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  EXPECT_TRUE(token_is(exact, lower)) << exact;
  EXPECT_TRUE(token_is(upper, lower)) << upper;
  for (size_t i = 0; i < exact.size(); ++i) {
    std::string changed = upper;
    changed[i] = changed[i] == 'X' ? 'Y' : 'X';
    EXPECT_FALSE(token_is(changed, lower)) << changed;
    changed[i] = '_';  // '_' | 0x20 is DEL, not '-': a token's other characters stay apart
    EXPECT_FALSE(token_is(changed, lower)) << changed;
  }
  EXPECT_FALSE(token_is(std::string_view(exact).substr(1), lower)) << exact;
  EXPECT_FALSE(token_is(exact + "s", lower)) << exact;
}

// token_is compares in words with overlapping loads: a difference in any one byte, at any
// length the three paths take (under 4, 4-7, 8 and over), must show.
TEST(TokenIs, EveryByteCountsAtEveryLength) {
  ExpectEveryByteCounts("te");
  ExpectEveryByteCounts("date");
  ExpectEveryByteCounts("server");
  ExpectEveryByteCounts("upgrade");
  ExpectEveryByteCounts("expect12");
  ExpectEveryByteCounts("connection");
  ExpectEveryByteCounts("content-length");
  ExpectEveryByteCounts("transfer-encoding");
  ExpectEveryByteCounts("proxy-authorization");
}

}  // namespace
}  // namespace peregrine
