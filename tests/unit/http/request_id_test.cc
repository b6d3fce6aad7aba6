#include "http/request_id.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace peregrine::http {
namespace {

bool is_hex(std::string_view id) {
  if (id.size() != kRequestIdLength) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

TEST(RequestId, MadeIdsAreHexAndDistinct) {
  std::set<std::string> seen;
  char id[kRequestIdLength];
  for (int i = 0; i < 10000; ++i) {
    make_request_id(id);
    std::string text(id, sizeof id);
    ASSERT_TRUE(is_hex(text)) << text;
    ASSERT_TRUE(seen.insert(text).second);
  }
}

TEST(RequestId, Validity) {
  EXPECT_TRUE(valid_request_id("abc-123_x.y:z/+=@"));
  EXPECT_TRUE(valid_request_id(std::string(128, 'a')));
  EXPECT_FALSE(valid_request_id(std::string(129, 'a')));
  EXPECT_FALSE(valid_request_id(""));
  EXPECT_FALSE(valid_request_id("a b"));
  EXPECT_FALSE(valid_request_id("a\"b"));
  EXPECT_FALSE(valid_request_id("a\nb"));
  EXPECT_FALSE(valid_request_id("\xc3\xa9"));
}

TEST(RequestId, MadeAndAddedWhenAbsent) {
  Request r;
  r.headers[0] = {"Host", "x"};
  r.header_count = 1;
  char storage[kRequestIdLength];
  assign_request_id(r, "X-Request-Id", true, storage);
  EXPECT_TRUE(is_hex(r.request_id));
  ASSERT_EQ(r.header_count, 2);
  EXPECT_EQ(r.header("x-request-id"), r.request_id);
}

TEST(RequestId, IncomingPassedOnlyWhenTrustedAndValid) {
  char storage[kRequestIdLength];
  Request r;
  r.headers[0] = {"x-request-id", "client-7"};
  r.header_count = 1;
  assign_request_id(r, "X-Request-Id", true, storage);
  EXPECT_EQ(r.request_id, "client-7");
  EXPECT_EQ(r.header_count, 1);

  r.headers[0] = {"X-Request-Id", "client-7"};
  r.request_id = {};
  assign_request_id(r, "X-Request-Id", false, storage);
  EXPECT_TRUE(is_hex(r.request_id));
  EXPECT_EQ(r.header("X-Request-Id"), r.request_id);  // replaced, not duplicated
  EXPECT_EQ(r.header_count, 1);

  r.headers[0] = {"X-Request-Id", "bad value\"with quotes"};
  assign_request_id(r, "X-Request-Id", true, storage);
  EXPECT_TRUE(is_hex(r.request_id));
  EXPECT_EQ(r.header("X-Request-Id"), r.request_id);
}

TEST(RequestId, DuplicatesCollapseToOne) {
  char storage[kRequestIdLength];
  Request r;
  r.headers[0] = {"X-Request-Id", "one"};
  r.headers[1] = {"Accept", "*/*"};
  r.headers[2] = {"X-Request-Id", "two"};
  r.header_count = 3;
  assign_request_id(r, "X-Request-Id", true, storage);
  EXPECT_EQ(r.request_id, "one");
  ASSERT_EQ(r.header_count, 2);
  EXPECT_EQ(r.headers[1].name, "Accept");
}

}  // namespace
}  // namespace peregrine::http
