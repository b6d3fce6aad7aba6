#include "core/strings.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine {
namespace {

// token_is compares in words with overlapping loads: a difference in any one byte, at any
// length the three paths take (under 4, 4-7, 8 and over), must show.
TEST(TokenIs, EveryByteCountsAtEveryLength) {
  const std::string lowers[] = {"te",
                                "date",
                                "server",
                                "upgrade",
                                "expect12",
                                "connection",
                                "content-length",
                                "transfer-encoding",
                                "proxy-authorization"};
  for (const std::string& lower : lowers) {
    std::string upper = lower;
    for (char& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    auto check = [&](std::string_view token) {
      switch (lower.size()) {
        case 2:
          return token_is(token, "te");
        case 4:
          return token_is(token, "date");
        case 6:
          return token_is(token, "server");
        case 7:
          return token_is(token, "upgrade");
        case 8:
          return token_is(token, "expect12");
        case 10:
          return token_is(token, "connection");
        case 14:
          return token_is(token, "content-length");
        case 17:
          return token_is(token, "transfer-encoding");
        default:
          return token_is(token, "proxy-authorization");
      }
    };
    EXPECT_TRUE(check(lower)) << lower;
    EXPECT_TRUE(check(upper)) << upper;
    for (size_t i = 0; i < lower.size(); ++i) {
      std::string changed = upper;
      changed[i] = changed[i] == 'X' ? 'Y' : 'X';
      EXPECT_FALSE(check(changed)) << changed;
      changed[i] = '_';  // '_' | 0x20 is DEL, not '-': a token's other characters stay apart
      EXPECT_FALSE(check(changed)) << changed;
    }
    EXPECT_FALSE(check(lower.substr(1))) << lower;
    EXPECT_FALSE(check(lower + "s")) << lower;
  }
}

}  // namespace
}  // namespace peregrine
