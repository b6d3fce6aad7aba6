// The registry of route handler readers: a key belongs to one handler, and the catalog used for
// "unknown key" hints knows every key a reader reads.
#include "config/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace peregrine::config {
namespace {

TEST(Registry, EveryHandlerKeyIsARouteKeyOwnedOnce) {
  std::set<std::string_view> seen;
  for (const RouteHandlerReader& handler : route_handlers()) {
    ASSERT_NE(handler.keys, nullptr);
    ASSERT_FALSE(handler.keys->empty());
    EXPECT_EQ(handler.keys->front(), handler.name) << "the selecting key comes first";
    EXPECT_NE(handler.read, nullptr);
    EXPECT_NE(handler.static_key, nullptr);
    for (std::string_view key : *handler.keys) {
      EXPECT_TRUE(seen.insert(key).second) << key << " belongs to two handlers";
      EXPECT_TRUE(contains(route_keys(), key)) << key;
    }
  }
  std::set<std::string_view> unique(route_keys().begin(), route_keys().end());
  EXPECT_EQ(unique.size(), route_keys().size()) << "a route key is listed twice";
}

TEST(Registry, ReturnComesFirstAndIsTheOnlyOneNamedByHandler) {
  auto handlers = route_handlers();
  ASSERT_GE(handlers.size(), 3u);
  EXPECT_EQ(handlers[0].kind, HandlerKind::kReturn);
  for (const RouteHandlerReader& handler : handlers) {
    EXPECT_EQ(handler.handler_key_selects, handler.kind == HandlerKind::kReturn) << handler.name;
  }
}

TEST(Registry, StaticOptionsApplyToFastcgiRoutesOnly) {
  for (const RouteHandlerReader& handler : route_handlers()) {
    const bool fastcgi = handler.kind == HandlerKind::kFastcgi;
    EXPECT_EQ(!handler.static_key("root").has_value(), fastcgi) << handler.name;
    EXPECT_EQ(!handler.static_key("index").has_value(), fastcgi) << handler.name;
    EXPECT_TRUE(handler.static_key("alias").has_value()) << handler.name;
  }
}

}  // namespace
}  // namespace peregrine::config
