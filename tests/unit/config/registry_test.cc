// The handlers a load knows (config/handler_type.h, the built-in set of handlers/builtin.h): a key
// belongs to one handler, and the catalog used for "unknown key" hints knows every key a reader
// reads.
#include "config/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "config/handler_type.h"
#include "config/reader.h"
#include "handlers/builtin.h"

namespace peregrine::config {
namespace {

// The handlers a route selects with a key of its own (return, fastcgi, proxy, ajp).
std::vector<const HandlerType*> keyed() {
  std::vector<const HandlerType*> out;
  for (const HandlerType* type : handlers::builtin().types()) {
    if (type->selection == HandlerType::Selection::kKey ||
        type->selection == HandlerType::Selection::kKeyOrHandler)
      out.push_back(type);
  }
  return out;
}

TEST(Registry, EveryHandlerKeyIsARouteKeyOwnedOnce) {
  const HandlerSet& set = handlers::builtin();
  std::set<std::string_view> seen;
  ASSERT_GE(keyed().size(), 4u);
  for (const HandlerType* handler : keyed()) {
    ASSERT_NE(handler->keys, nullptr);
    ASSERT_FALSE(handler->keys->empty());
    EXPECT_EQ(handler->keys->front(), handler->name) << "the selecting key comes first";
    for (std::string_view key : *handler->keys) {
      EXPECT_TRUE(seen.insert(key).second) << key << " belongs to two handlers";
      EXPECT_TRUE(contains(set.route_keys(), key)) << key;
    }
  }
  std::set<std::string_view> unique(set.route_keys().begin(), set.route_keys().end());
  EXPECT_EQ(unique.size(), set.route_keys().size()) << "a route key is listed twice";
}

TEST(Registry, ReturnComesFirstAndIsTheOnlyOneNamedByHandler) {
  auto handlers = keyed();
  ASSERT_GE(handlers.size(), 3u);
  EXPECT_EQ(handlers[0]->name, "return");
  for (const HandlerType* handler : handlers) {
    EXPECT_EQ(handler->selection == HandlerType::Selection::kKeyOrHandler,
              handler->name == "return")
        << handler->name;
  }
}

TEST(Registry, StaticOptionsApplyToFastcgiRoutesOnly) {
  for (const HandlerType* handler : keyed()) {
    const bool fastcgi = handler->name == "fastcgi";
    EXPECT_EQ(!handler->static_key("root").has_value(), fastcgi) << handler->name;
    EXPECT_EQ(!handler->static_key("index").has_value(), fastcgi) << handler->name;
    EXPECT_TRUE(handler->static_key("alias").has_value()) << handler->name;
  }
}

// The handlers without a key of their own: static files when nothing selects another, and an
// embedding program's for handler = "NAME"; the precedence order names shared groups' users.
TEST(Registry, StaticIsTheDefaultAndApplicationTakesOtherNames) {
  const HandlerSet& set = handlers::builtin();
  ASSERT_NE(set.default_type(), nullptr);
  EXPECT_EQ(set.default_type()->name, "static");
  ASSERT_NE(set.named_type(), nullptr);
  EXPECT_EQ(set.named_type()->name, "application");
  EXPECT_EQ(set.find("proxy"), set.types()[set.rank("proxy")]);
  EXPECT_LT(set.rank("fastcgi"), set.rank("proxy"));
  EXPECT_LT(set.rank("proxy"), set.rank("ajp"));
  EXPECT_EQ(set.rank("none"), set.types().size());
}

TEST(Registry, AHandlerThatUsesGroupsSpeaksItsOwnProtocol) {
  for (const HandlerType* handler : handlers::builtin().types()) {
    const bool gateway =
        handler->name == "fastcgi" || handler->name == "proxy" || handler->name == "ajp";
    ASSERT_EQ(handler->upstream != nullptr, gateway) << handler->name;
    if (gateway) {
      EXPECT_EQ(handler->upstream->protocol, handler->name);
      EXPECT_FALSE(handler->upstream->address_hint.empty()) << handler->name;
    }
    // Gateways pass any method token on; static and return routes answer 405 outside theirs.
    EXPECT_EQ(handler->default_methods.empty(), gateway || handler->name == "application")
        << handler->name;
  }
}

}  // namespace
}  // namespace peregrine::config
