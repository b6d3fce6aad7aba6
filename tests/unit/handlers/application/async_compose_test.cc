// peregrine::Async<T>: coroutines awaited by coroutines. No worker needed: an Async runs on the
// thread that awaits it, and these tests resume suspended ones by hand.
#include <gtest/gtest.h>

#include <coroutine>
#include <stdexcept>
#include <string>

#include "peregrine/async.h"

namespace peregrine {
namespace {

// An awaitable the test resumes itself, standing in for a timer or a socket.
struct Gate {
  std::coroutine_handle<> waiter;
  int value = 0;
  auto wait() {
    struct Awaiter {
      Gate* gate;
      bool await_ready() const { return false; }
      void await_suspend(std::coroutine_handle<> h) { gate->waiter = h; }
      int await_resume() const { return gate->value; }
    };
    return Awaiter{this};
  }
  void open(int v) {
    value = v;
    std::exchange(waiter, {}).resume();
  }
};

Async<int> twice(int n) {
  co_return 2 * n;
}

Async<std::string> describe(int n) {
  int doubled = co_await twice(n);
  co_return "n=" + std::to_string(n) + " doubled=" + std::to_string(doubled);
}

Task run_describe(int n, std::string* out) {
  *out = co_await describe(n);
}

TEST(AsyncCompose, ValuesComeBackThroughNestedCoroutines) {
  std::string out;
  run_describe(21, &out);  // nothing suspends: done when the call returns
  EXPECT_EQ(out, "n=21 doubled=42");
}

Async<int> wait_then_add(Gate& gate, int add) {
  int v = co_await gate.wait();
  co_return v + add;
}

Async<void> record(Gate& gate, std::string* log) {
  log->append("start;");
  int v = co_await wait_then_add(gate, 1);
  log->append("inner=" + std::to_string(v) + ";");
}

Task outer(Gate& gate, std::string* log) {
  co_await record(gate, log);
  log->append("outer done");
}

TEST(AsyncCompose, ASuspendedInnerCoroutineResumesItsAwaiters) {
  Gate gate;
  std::string log;
  outer(gate, &log);
  EXPECT_EQ(log, "start;");  // waiting at the gate, three coroutines deep
  ASSERT_TRUE(gate.waiter);
  gate.open(41);
  EXPECT_EQ(log, "start;inner=42;outer done");
}

Async<int> fails() {
  throw std::runtime_error("no such user");
  co_return 0;
}

Task catch_it(std::string* out) {
  try {
    co_await fails();
    *out = "no exception";
  } catch (const std::runtime_error& e) {
    *out = e.what();
  }
}

TEST(AsyncCompose, AnExceptionReachesTheAwaiter) {
  std::string out;
  catch_it(&out);
  EXPECT_EQ(out, "no such user");
}

Async<int> step(int i) {
  co_return i;
}

Task many(long* sum) {
  for (int i = 0; i < 10000; ++i) *sum += co_await step(i);
}

// A long loop of awaits that finish at once: no frame leaks (ASan checks). In an optimized build
// each transfer is a tail call; an unoptimized (sanitizer) build nests them, hence 10,000.
TEST(AsyncCompose, ManyAwaitsInALoop) {
  long sum = 0;
  many(&sum);
  EXPECT_EQ(sum, 10000L * 9999 / 2);
}

TEST(AsyncCompose, NeverAwaitedNeverRuns) {
  bool ran = false;
  auto body = [](bool* flag) -> Async<void> {
    *flag = true;
    co_return;
  };
  { Async<void> unused = body(&ran); }  // made and dropped: its frame is freed unstarted
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace peregrine
