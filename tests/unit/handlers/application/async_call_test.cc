// The adapter between the public asynchronous API and a connection's Downstream, against a
// recording Downstream (the connection's side is tested through the real server in
// tests/integration/test_library_api.py).
#include "handlers/application/async_call.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/app_worker.h"

namespace peregrine {
namespace {

using std::chrono::milliseconds;

class RecordingDownstream final : public handlers::Downstream {
 public:
  void resume_body() override { ++resumes; }
  void respond(Response& response) override {
    events.push_back("respond " + std::to_string(response.status()));
  }
  bool send_head(Response& head, int64_t length) override {
    events.push_back("head " + std::to_string(head.status()) + " " + std::to_string(length));
    return !gone;
  }
  Sent send_body(std::string_view bytes) override {
    if (gone) return Sent::kGone;
    events.push_back("body " + std::string(bytes));
    return full ? Sent::kFull : Sent::kMore;
  }
  void finish() override { events.push_back("finish"); }
  void fail(int status) override { events.push_back("fail " + std::to_string(status)); }
  bool head_sent() const override { return false; }

  std::vector<std::string> events;
  int resumes = 0;
  bool full = false;
  bool gone = false;
};

class AsyncCallTest : public ::testing::Test {
 protected:
  AsyncCallTest() {
    clock_.monotonic_ms = 1000;
    request_.method = Method::kPost;
    request_.content_length = 10;
  }
  // The exchange the connection would hold, and a handle the application would hold.
  detail::Call* start() { return detail::Call::make(request_, downstream_, worker_); }
  void turn(int64_t ms = 0) {
    clock_.monotonic_ms += ms;
    worker_.run(clock_.monotonic_ms);
  }

  Clock clock_;
  server::AppWorker worker_{nullptr, 0, 1, clock_};
  Request request_;
  RecordingDownstream downstream_;
};

// A coroutine that reads the whole body and answers with what it read.
Task read_all(AsyncResponse res, std::string* seen, bool* cancelled) {
  for (;;) {
    BodyPiece piece = co_await res.read();
    if (piece.cancelled) {
      *cancelled = true;
      co_return;
    }
    *seen += std::string(piece.bytes) + "|";
    if (piece.last) break;
  }
  res.respond();
}

TEST_F(AsyncCallTest, CoroutineReadsOnePieceAtATime) {
  detail::Call* call = start();
  std::string seen;
  bool cancelled = false;
  read_all(AsyncResponse(call), &seen, &cancelled);
  // Nothing yet: the coroutine waits. A piece arrives: kept, the connection paused.
  EXPECT_FALSE(call->on_body("hello", false));
  EXPECT_EQ(seen, "");
  turn();  // the reader wakes from the loop, takes it and asks for more
  EXPECT_EQ(seen, "hello|");
  EXPECT_EQ(downstream_.resumes, 1);
  EXPECT_TRUE(call->on_body("world", true));
  turn();
  EXPECT_EQ(seen, "hello|world|");
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"respond 200"});
  EXPECT_FALSE(cancelled);
}

TEST_F(AsyncCallTest, NoBodyReadsEmptyAndLast) {
  request_.content_length = -1;
  detail::Call* call = start();
  std::string seen;
  bool cancelled = false;
  read_all(AsyncResponse(call), &seen, &cancelled);
  EXPECT_EQ(seen, "|");
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"respond 200"});
}

TEST_F(AsyncCallTest, AbortWakesTheReaderCancelled) {
  detail::Call* call = start();
  std::string seen;
  bool cancelled = false;
  Ref<detail::Call> keep(call);
  read_all(AsyncResponse(call), &seen, &cancelled);
  call->on_abort();
  EXPECT_FALSE(cancelled);  // not from inside the connection's call...
  turn();
  EXPECT_TRUE(cancelled);  // ...but on the next turn of the loop
  EXPECT_TRUE(downstream_.events.empty());
}

Task stream(AsyncResponse res, std::vector<IoStatus>* results) {
  res.response().set_status(200);
  results->push_back(co_await res.write("a"));
  results->push_back(co_await res.write("b"));
  res.finish();
}

TEST_F(AsyncCallTest, WriteWaitsForRoomWhenFull) {
  detail::Call* call = start();
  std::vector<IoStatus> results;
  downstream_.full = true;
  stream(AsyncResponse(call), &results);
  EXPECT_EQ(downstream_.events, (std::vector<std::string>{"head 200 -1", "body a"}));
  EXPECT_TRUE(results.empty());  // suspended until the client takes it
  downstream_.full = false;
  call->on_writable();
  EXPECT_EQ(results, (std::vector<IoStatus>{IoStatus::kOk, IoStatus::kOk}));
  EXPECT_EQ(downstream_.events.back(), "finish");
}

TEST_F(AsyncCallTest, WriteToAGoneClientIsCancelled) {
  detail::Call* call = start();
  std::vector<IoStatus> results;
  downstream_.gone = true;
  Ref<detail::Call> keep(call);
  stream(AsyncResponse(call), &results);
  EXPECT_EQ(results, (std::vector<IoStatus>{IoStatus::kCancelled, IoStatus::kCancelled}));
  EXPECT_TRUE(call->cancelled());
  // No finish after the head failed: the exchange ended with send_head's false.
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"head 200 -1"});
}

Task nap(AsyncResponse res, int* result) {
  *result = (co_await res.sleep(milliseconds(100))) ? 1 : 0;
}

TEST_F(AsyncCallTest, SleepElapsesOrIsCancelled) {
  int elapsed = -1, cut = -1;
  detail::Call* first = start();
  Ref<detail::Call> keep_first(first);
  AsyncResponse hold_first(first);
  nap(hold_first, &elapsed);
  turn(99);
  EXPECT_EQ(elapsed, -1);
  turn(1);
  EXPECT_EQ(elapsed, 1);

  detail::Call* second = start();
  Ref<detail::Call> keep_second(second);
  AsyncResponse hold_second(second);
  nap(hold_second, &cut);
  second->on_abort();
  turn();
  EXPECT_EQ(cut, 0);
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), -1);  // its timer is gone too
  first->on_abort();
}

TEST_F(AsyncCallTest, CancelListenersRunOnceFromTheLoop) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  AsyncResponse res(call);
  int runs = 0, removed = 0;
  res.on_cancel([&] { ++runs; });
  uint64_t id = res.on_cancel([&] { ++removed; });
  res.remove_cancel(id);
  call->on_abort();
  EXPECT_EQ(runs, 0);
  turn();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(removed, 0);
  res.on_cancel([&] { ++runs; });  // already cancelled: at once
  EXPECT_EQ(runs, 2);
  res.respond();  // a no-op now
  EXPECT_TRUE(downstream_.events.empty());
}

TEST_F(AsyncCallTest, DroppedWithoutAnswerIs500) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  { AsyncResponse res(call); }
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"fail 500"});
  EXPECT_TRUE(call->done());
}

TEST_F(AsyncCallTest, CallbackBodyPausesAndResumes) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  AsyncResponse res(call);
  std::string seen;
  res.on_body([&](const BodyPiece& piece) {
    seen += std::string(piece.bytes) + (piece.last ? "." : "|");
    return false;  // pause after each piece
  });
  EXPECT_FALSE(call->on_body("ab", false));
  EXPECT_EQ(seen, "ab|");
  res.resume_body();
  EXPECT_EQ(downstream_.resumes, 1);
  EXPECT_TRUE(call->on_body("cd", true));
  EXPECT_EQ(seen, "ab|cd.");
  res.respond();
}

TEST_F(AsyncCallTest, BodyBeforeTheCallbackIsKept) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  AsyncResponse res(call);
  EXPECT_FALSE(call->on_body("early", false));
  std::string seen;
  res.on_body([&](const BodyPiece& piece) {
    seen += std::string(piece.bytes);
    return true;
  });
  EXPECT_EQ(seen, "");
  turn();
  EXPECT_EQ(seen, "early");
  EXPECT_EQ(downstream_.resumes, 1);  // the callback wanted more
  res.respond();
}

TEST_F(AsyncCallTest, FinishWithoutStreamingIsACompleteResponse) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  AsyncResponse res(call);
  res.response().set_status(204);
  res.finish();
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"respond 204"});
  EXPECT_EQ(res.send("x"), IoStatus::kCancelled);  // ended: nothing more goes out
}

TEST_F(AsyncCallTest, RespondAfterTheHeadOnlyFinishes) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  AsyncResponse res(call);
  ASSERT_TRUE(res.start());
  res.respond();
  EXPECT_EQ(downstream_.events, (std::vector<std::string>{"head 200 -1", "finish"}));
}

TEST_F(AsyncCallTest, CallbackSendFullThenOnWritable) {
  detail::Call* call = start();
  Ref<detail::Call> keep(call);
  AsyncResponse res(call);
  int writable = 0;
  res.on_writable([&] {
    ++writable;
    EXPECT_EQ(res.send("more"), IoStatus::kOk);
    res.finish();
  });
  downstream_.full = true;
  EXPECT_EQ(res.send("first"), IoStatus::kFull);
  downstream_.full = false;
  call->on_writable();
  EXPECT_EQ(writable, 1);
  EXPECT_EQ(downstream_.events,
            (std::vector<std::string>{"head 200 -1", "body first", "body more", "finish"}));
  call->on_writable();  // after the end: nothing runs
  EXPECT_EQ(writable, 1);
}

}  // namespace
}  // namespace peregrine
