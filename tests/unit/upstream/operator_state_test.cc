#include "upstream/operator_state.h"

#include <gtest/gtest.h>

#include "upstream/balancer.h"

namespace peregrine::upstream {
namespace {

TEST(OperatorState, Actions) {
  EXPECT_EQ(operator_action("drain"), OperatorState::kDrained);
  EXPECT_EQ(operator_action("disable"), OperatorState::kDisabled);
  EXPECT_EQ(operator_action("enable"), OperatorState::kNone);
  EXPECT_FALSE(operator_action("stop"));
  EXPECT_STREQ(to_string(OperatorState::kDrained), "drained");
  EXPECT_STREQ(to_string(OperatorState::kNone), "");
}

TEST(OperatorState, SetNotifiesAndRetainForgetsRemovedServers) {
  OperatorStates states;
  int told = 0;
  const int id = states.subscribe([&] { ++told; });
  states.set("app", "a:1", OperatorState::kDrained);
  states.set("app", "b:1", OperatorState::kDisabled);
  EXPECT_EQ(told, 2);
  EXPECT_EQ(states.get("app", "a:1"), OperatorState::kDrained);
  EXPECT_EQ(states.get("app", "b:1"), OperatorState::kDisabled);
  EXPECT_EQ(states.get("other", "a:1"), OperatorState::kNone);

  config::Config next;
  config::UpstreamGroup group;
  group.name = "app";
  group.servers.emplace_back().address = "a:1";
  next.upstreams.push_back(group);
  states.retain(next);
  EXPECT_EQ(states.get("app", "a:1"), OperatorState::kDrained);  // still there: kept
  EXPECT_EQ(states.get("app", "b:1"), OperatorState::kNone);     // removed by the reload

  states.set("app", "a:1", OperatorState::kNone);
  EXPECT_EQ(states.get("app", "a:1"), OperatorState::kNone);
  states.unsubscribe(id);
  states.set("app", "a:1", OperatorState::kDrained);
  EXPECT_EQ(told, 3);
}

TEST(OperatorState, BalancerSkipsAServerTakenOut) {
  Upstream u({{"a", 1}, {"b", 1}}, Strategy::kRoundRobin);
  u.group().set_operator_out(0, true);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(u.pick({}), 1u);
  u.group().set_operator_out(1, true);
  EXPECT_FALSE(u.pick({}));
  u.group().set_operator_out(0, false);
  EXPECT_EQ(u.pick({}), 0u);
}

}  // namespace
}  // namespace peregrine::upstream
