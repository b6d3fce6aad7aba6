#include "admin/json.h"

#include <gtest/gtest.h>

namespace peregrine::admin {
namespace {

TEST(AdminJson, StringMember) {
  EXPECT_EQ(json_string_member(R"({"password": "s3cret"})", "password"), "s3cret");
  EXPECT_EQ(json_string_member(R"( { "a" : [1, {"b": "c"}], "token":"t" } )", "token"), "t");
  EXPECT_EQ(json_string_member(R"({"p": "a\"b\\c\/\n\u00e9\ud83d\ude00"})", "p"),
            "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(json_string_member(R"({"n": 1.5e3, "t": true, "z": null, "p": "x"})", "p"), "x");
}

TEST(AdminJson, AbsentOrMalformed) {
  EXPECT_EQ(json_string_member(R"({"password": 5})", "password"), std::nullopt);
  EXPECT_EQ(json_string_member(R"({})", "password"), std::nullopt);
  EXPECT_EQ(json_string_member(R"({"password": "x")", "password"), std::nullopt);
  EXPECT_EQ(json_string_member(R"({"password": "x"} trailing)", "password"), std::nullopt);
  EXPECT_EQ(json_string_member(R"(["password", "x"])", "password"), std::nullopt);
  EXPECT_EQ(json_string_member("password=x", "password"), std::nullopt);
  EXPECT_EQ(json_string_member(R"({"p": "\ud83d"})", "p"), std::nullopt);
  EXPECT_EQ(json_string_member("{\"p\": \"a\nb\"}", "p"), std::nullopt);  // raw control character
  EXPECT_EQ(json_string_member("", "p"), std::nullopt);
}

}  // namespace
}  // namespace peregrine::admin
