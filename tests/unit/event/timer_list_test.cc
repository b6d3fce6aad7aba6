#include "event/timer_list.h"

#include <gtest/gtest.h>

#include <vector>

#include "event/timer_set.h"

namespace peregrine::event {
namespace {

TEST(TimerList, ExpiresInDeadlineOrder) {
  TimerList list(100);
  TimerNode a, b, c;
  list.arm(a, 0);
  list.arm(b, 10);
  list.arm(c, 20);
  EXPECT_EQ(list.next_in(0), 100);
  EXPECT_EQ(list.pop_expired(99), nullptr);
  EXPECT_EQ(list.pop_expired(110), &a);
  EXPECT_EQ(list.pop_expired(110), &b);
  EXPECT_EQ(list.pop_expired(110), nullptr);
  EXPECT_FALSE(a.armed());
  EXPECT_TRUE(c.armed());
}

TEST(TimerList, RearmMovesToTail) {
  TimerList list(100);
  TimerNode a, b;
  list.arm(a, 0);
  list.arm(b, 10);
  list.arm(a, 50);  // a is pushed back behind b
  EXPECT_EQ(list.pop_expired(200), &b);
  EXPECT_EQ(list.pop_expired(200), &a);
  EXPECT_TRUE(list.empty());
}

TEST(TimerList, DisarmFromMiddleAndMoveBetweenLists) {
  TimerList header(10), idle(1000);
  TimerNode a, b, c;
  header.arm(a, 0);
  header.arm(b, 0);
  header.arm(c, 0);
  TimerList::disarm(b);
  idle.arm(c, 0);  // moving to another list unlinks it from the first
  EXPECT_EQ(c.list, &idle);
  EXPECT_EQ(header.pop_expired(10), &a);
  EXPECT_EQ(header.pop_expired(10), nullptr);
  EXPECT_TRUE(header.empty());
  EXPECT_EQ(idle.next_in(0), 1000);
  TimerList::disarm(b);  // disarming twice is harmless
}

TEST(TimerList, EmptyListHasNoDeadline) {
  TimerList list(5);
  EXPECT_EQ(list.next_in(0), -1);
  EXPECT_EQ(list.pop_expired(1'000'000), nullptr);
}

// An owner that puts its work off again each time, as an upstream read over its budget does.
struct Persistent final : TimerOwner {
  TimerSet& set;
  TimerNode node;
  int fired = 0;
  explicit Persistent(TimerSet& s) : set(s) { node.owner = this; }
  void on_timeout() override {
    ++fired;
    set.arm_soon(node);
  }
};

TEST(TimerSet, SoonFiresAtTheNextRunAndReArmingWaitsForTheOneAfter) {
  TimerSet set;
  EXPECT_EQ(set.next_in(0), -1);
  Persistent p(set);
  set.arm(p.node, 5000, 0);
  set.arm_soon(p.node);          // from the 5 s list to the soon one
  EXPECT_EQ(set.next_in(0), 0);  // the loop must not block
  set.run(0);
  EXPECT_EQ(p.fired, 1);  // once, though it re-armed itself: the run ended
  EXPECT_EQ(set.next_in(0), 0);
  set.run(0);
  EXPECT_EQ(p.fired, 2);
  TimerList::disarm(p.node);
  EXPECT_EQ(set.next_in(0), -1);
  set.run(10'000);  // nor did it stay on the 5 s list
  EXPECT_EQ(p.fired, 2);
}

TEST(TimerSet, ARunFiresABoundedShareOfTheSoonListInOrder) {
  TimerSet set;
  std::vector<Persistent> owners;
  owners.reserve(TimerSet::kSoonPerRun + 2);
  for (int i = 0; i < TimerSet::kSoonPerRun + 2; ++i) owners.emplace_back(set);
  for (Persistent& p : owners) set.arm_soon(p.node);
  set.run(0);  // the first kSoonPerRun, each of which asks again
  for (int i = 0; i < TimerSet::kSoonPerRun; ++i) EXPECT_EQ(owners[i].fired, 1) << i;
  EXPECT_EQ(owners[TimerSet::kSoonPerRun].fired, 0);
  set.run(0);  // the two left over come first, then those that asked again
  EXPECT_EQ(owners[TimerSet::kSoonPerRun].fired, 1);
  EXPECT_EQ(owners[TimerSet::kSoonPerRun + 1].fired, 1);
  EXPECT_EQ(owners[0].fired, 2);
  EXPECT_EQ(owners[TimerSet::kSoonPerRun - 3].fired, 2);
  EXPECT_EQ(owners[TimerSet::kSoonPerRun - 2].fired, 1);
}

}  // namespace
}  // namespace peregrine::event
