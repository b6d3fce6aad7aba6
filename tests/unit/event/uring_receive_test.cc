// Receiving and sending through the io_uring poller. Receiving (event::kReceive): multishot
// receives into the provided buffer ring, whose bytes come with the events. What a connection
// relies on: every byte once, in order, to the current target; an empty delivery at the end;
// back-pressure by pause/resume; and a close that releases the socket. Sending (Poller::send):
// the whole copy goes out, one kSent at its end, and a close never lets it reach another socket.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "event/poller.h"
#include "min_timeout_support.h"

namespace peregrine::event {
namespace {

struct Receiver : Pollable {
  void on_ready(uint32_t readiness) override { ready |= readiness; }
  void on_received(const char* bytes, size_t length) override {
    if (length == 0) {
      ++ends;
    } else {
      received.append(bytes, length);
    }
  }
  void on_sent(bool ok) override { ++(ok ? sent : failed); }
  uint32_t ready = 0;
  std::string received;
  int ends = 0;
  int sent = 0;
  int failed = 0;
};

constexpr uint32_t kReceiving = kReadable | kWritable | kEdgeTriggered | kReceive;

class UringReceiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendChoice choice = choose_backend(Backend::kIoUring);
    if (!choice.ok) GTEST_SKIP() << "io_uring unavailable: " << choice.reason;
    std::string error;
    poller = make_uring_poller(&error);
    ASSERT_TRUE(poller) << error;
    if (!poller->receives()) GTEST_SKIP() << "no multishot receive on this kernel";
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair), 0);
  }
  void TearDown() override {
    poller.reset();
    for (int fd : pair)
      if (fd >= 0) ::close(fd);
  }

  // One wait(), its events dispatched as the worker does; returns how many there were.
  int pump(int timeout_ms = 100) {
    ReadyEvent events[64];
    int n = poller->wait(timeout_ms, events, 64);
    for (int i = 0; i < n; ++i) events[i].dispatch();
    return n;
  }
  void send_text(const std::string& text) {
    ASSERT_EQ(::send(pair[1], text.data(), text.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(text.size()));
  }

  std::unique_ptr<Poller> poller;
  int pair[2] = {-1, -1};
  Receiver a, b;
};

TEST(ReceiveSupport, EpollNeitherReceivesNorSends) {
  std::unique_ptr<Poller> epoll = make_epoll_poller();
  EXPECT_FALSE(epoll->receives());
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair), 0);
  Receiver target;
  ASSERT_TRUE(epoll->add(pair[0], kReadable | kWritable | kEdgeTriggered, &target));
  EXPECT_FALSE(epoll->send(pair[0], "x"));  // the connection then writes to the socket itself
  ::close(pair[0]);
  ::close(pair[1]);
}

TEST_F(UringReceiveTest, BytesComeWithTheEventAndNoReadabilityIsReported) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  EXPECT_EQ(a.ready, uint32_t{kOut});  // writability still reported, readability never
  send_text("GET / HTTP/1.1\r\n\r\n");
  pump();
  EXPECT_EQ(a.received, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(a.ready & kIn);
  char byte;
  EXPECT_EQ(::recv(pair[0], &byte, 1, 0), -1);  // the poller took the bytes, not left them
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(UringReceiveTest, TheEndOfTheStreamIsOneEmptyDelivery) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  send_text("last");
  ::shutdown(pair[1], SHUT_WR);
  pump();
  pump();
  EXPECT_EQ(a.received, "last");
  EXPECT_EQ(a.ends, 1);
  pump();  // the receive is over: no second end
  EXPECT_EQ(a.ends, 1);
}

TEST_F(UringReceiveTest, ManyMegabytesArriveInOrderAcrossBufferRingRefills) {
  // More than the buffer ring holds at once: the receive runs out of buffers (-ENOBUFS), gets
  // them back at the next wait and goes on, without losing or reordering a byte.
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  std::string sent;
  for (int i = 0; sent.size() < 3u << 20; ++i) sent += std::to_string(i) + ",";
  std::thread writer([&] {
    size_t at = 0;
    while (at < sent.size()) {
      ssize_t n = ::send(pair[1], sent.data() + at, sent.size() - at, MSG_NOSIGNAL);
      if (n > 0) at += static_cast<size_t>(n);
      if (n < 0) std::this_thread::yield();
    }
  });
  for (int rounds = 0; a.received.size() < sent.size() && rounds < 100000; ++rounds) pump(10);
  writer.join();
  ASSERT_EQ(a.received.size(), sent.size());
  EXPECT_TRUE(a.received == sent);
}

TEST_F(UringReceiveTest, PauseLeavesBytesInTheSocketUntilResumed) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  send_text("one");
  pump();
  ASSERT_EQ(a.received, "one");
  poller->pause_receiving(pair[0]);
  pump();  // the cancellation goes in
  send_text("two");
  pump();
  EXPECT_EQ(a.received, "one");
  char peek[8];
  EXPECT_EQ(::recv(pair[0], peek, sizeof peek, MSG_PEEK), 3);  // still in the socket
  poller->resume_receiving(pair[0]);
  pump();
  EXPECT_EQ(a.received, "onetwo");
}

TEST_F(UringReceiveTest, ResumeRightAfterPauseLosesNothing) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  poller->pause_receiving(pair[0]);
  poller->resume_receiving(pair[0]);  // before the kernel has seen the cancellation
  send_text("abc");
  pump();
  pump();
  EXPECT_EQ(a.received, "abc");
}

TEST_F(UringReceiveTest, ModifyHandsLaterBytesToTheNewTargetInOrder) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  send_text("1");
  ASSERT_TRUE(poller->modify(pair[0], kReceiving, &b));
  send_text("2");
  pump();
  pump();
  EXPECT_EQ(a.received + b.received, "12");
  EXPECT_EQ(b.received.back(), '2');
  EXPECT_FALSE(poller->modify(pair[0], kReadable | kWritable | kEdgeTriggered, &b));
  EXPECT_EQ(errno, EINVAL);  // receiving is fixed when the descriptor is added
}

// Two modifies before the kernel has seen the first one's cancellation (a user that watches
// writability only while a write is blocked toggles it that fast): the receive must still be
// taken up again. It was lost: the stopping receive's last completion matched neither the new
// generation nor the one the second modify recorded.
TEST_F(UringReceiveTest, TwoModifiesInOneBatchKeepReceiving) {
  constexpr uint32_t kReceivingQuiet = kReadable | kEdgeTriggered | kReceive;
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  ASSERT_TRUE(poller->modify(pair[0], kReceivingQuiet, &a));
  ASSERT_TRUE(poller->modify(pair[0], kReceiving, &a));
  pump();
  pump();
  send_text("after");
  pump();
  pump();
  EXPECT_EQ(a.received, "after");
}

TEST_F(UringReceiveTest, AModifyDoesNotUndoAPause) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  poller->pause_receiving(pair[0]);
  ASSERT_TRUE(poller->modify(pair[0], kReadable | kEdgeTriggered | kReceive, &a));
  pump();
  send_text("held");
  pump();
  EXPECT_EQ(a.received, "");
  poller->resume_receiving(pair[0]);
  pump();
  pump();
  EXPECT_EQ(a.received, "held");
}

TEST_F(UringReceiveTest, CloseCancelsTheReceiveSoThePeerSeesTheEnd) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  poller->close(pair[0]);
  pair[0] = -1;
  pump();  // the cancellation is submitted: the receive lets go of the socket
  char byte;
  EXPECT_EQ(::recv(pair[1], &byte, 1, 0), 0);
  ::send(pair[1], "late", 4, MSG_NOSIGNAL);  // fails (EPIPE): nothing reaches the closed target
  pump();
  EXPECT_EQ(a.received, "");
}

TEST_F(UringReceiveTest, AReceiveClosedBeforeItsFirstWaitNeverTakesTheNumbersNextSocketsBytes) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));  // its receive is only queued so far
  const int number = pair[0];
  poller->close(pair[0]);
  pair[0] = -1;
  int next[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, next), 0);
  ASSERT_EQ(::send(next[1], "mine", 4, MSG_NOSIGNAL), 4);
  ASSERT_TRUE(poller->add(next[0], kReceiving, &b));
  pump();
  pump(10);
  EXPECT_EQ(b.received, "mine") << "reused number: " << (next[0] == number);
  EXPECT_EQ(a.received, "");
  poller->close(next[0]);
  ::close(next[1]);
}

TEST_F(UringReceiveTest, RemoveDropsBytesAlreadyTaken) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  send_text("gone");
  poller->remove(pair[0]);
  pump();
  pump();
  EXPECT_EQ(a.received, "");
}

std::string read_all(int fd, size_t want) {
  std::string got;
  char buffer[65536];
  for (int idle = 0; got.size() < want && idle < 2000;) {
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      got.append(buffer, static_cast<size_t>(n));
      idle = 0;
    } else {
      ++idle;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return got;
}

TEST_F(UringReceiveTest, SendGoesOutWithTheNextWaitAndEndsOnce) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  std::string copy = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
  ASSERT_TRUE(poller->send(pair[0], copy));
  EXPECT_FALSE(poller->send(pair[0], "second"));  // one at a time: refused, not lost
  EXPECT_FALSE(poller->send(pair[1], "x"));       // not registered
  copy.assign(copy.size(), 'x');                  // the poller sends its own copy
  char byte;
  EXPECT_EQ(::recv(pair[1], &byte, 1, 0), -1);  // nothing before the wait
  pump();
  pump(10);
  EXPECT_EQ(read_all(pair[1], 40), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(a.sent, 1);
  EXPECT_EQ(a.failed, 0);
}

TEST_F(UringReceiveTest, ASendLargerThanTheSocketTakesGoesOutWholeAcrossPartialWrites) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  std::string sent;
  for (int i = 0; sent.size() < 4u << 20; ++i) sent += std::to_string(i) + ";";
  ASSERT_TRUE(poller->send(pair[0], sent));
  std::string got;
  std::thread reader([&] { got = read_all(pair[1], sent.size()); });
  for (int rounds = 0; a.sent + a.failed == 0 && rounds < 10000; ++rounds) pump(10);
  reader.join();
  EXPECT_EQ(a.sent, 1);
  ASSERT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent);
}

TEST_F(UringReceiveTest, ASendToAClosedPeerFails) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  ::close(pair[1]);
  pair[1] = -1;
  pump();
  ASSERT_TRUE(poller->send(pair[0], "too late"));
  pump();
  pump(10);
  EXPECT_EQ(a.failed, 1);
  EXPECT_EQ(a.sent, 0);
}

TEST_F(UringReceiveTest, CloseCancelsAWaitingSendAndItNeverReachesTheNumbersNextSocket) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  // Fill the socket so the send has to wait for room, then close it.
  std::string block(1 << 20, 'o');
  while (::send(pair[0], block.data(), block.size(), MSG_NOSIGNAL) > 0) {
  }
  ASSERT_TRUE(poller->send(pair[0], "OLD"));
  const int number = pair[0];
  poller->close(pair[0]);
  pair[0] = -1;
  // The next socket likely gets the same number: it must never see the old send's bytes.
  int next[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, next), 0);
  ASSERT_TRUE(poller->add(next[0], kReceiving, &b));
  pump();
  pump(10);
  char bytes[8];
  EXPECT_EQ(::recv(next[1], bytes, sizeof bytes, 0), -1)
      << "reused number: " << (next[0] == number);
  EXPECT_EQ(a.sent + a.failed, 0);  // the closed target hears nothing
  EXPECT_EQ(b.sent + b.failed, 0);
  poller->close(next[0]);
  ::close(next[1]);
}

// A close right after a send: the bytes go out, then the end.
TEST_F(UringReceiveTest, ACloseRightAfterASendDeliversTheBytesThenTheEnd) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump();
  ASSERT_TRUE(poller->send(pair[0], "bye"));
  poller->close(pair[0]);
  pair[0] = -1;
  pump();
  pump(10);
  char bytes[8];
  ASSERT_EQ(::recv(pair[1], bytes, sizeof bytes, 0), 3);
  EXPECT_EQ(std::string(bytes, 3), "bye");
  EXPECT_EQ(::recv(pair[1], bytes, sizeof bytes, 0), 0);
}

// A worker is destroyed on the main thread after its loop has ended, and closes what it still
// holds there (pooled upstream connections: 1,000 in test_compression). The kernel refuses
// that thread's submissions (one submitting thread), so a full submission queue must not make
// it wait for room forever.
TEST_F(UringReceiveTest, ClosesOnAnotherThreadAfterTheLoopNeverWaitForRoom) {
  ASSERT_TRUE(poller->add(pair[0], kReceiving, &a));
  pump(20);  // this thread now owns the ring
  std::atomic<bool> done{false};
  std::thread teardown([&] {
    for (int i = 0; i < 3000; ++i) {  // more submissions than the queue holds (1,024)
      int p[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p) != 0) break;
      poller->add(p[0], kReadable | kEdgeTriggered, &b);
      poller->close(p[0]);
      ::close(p[1]);
    }
    done = true;
  });
  for (int i = 0; i < 100 && !done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!done) {
    // The thread spins on the poller: nothing can be torn down safely any more.
    std::fprintf(stderr, "a close on another thread waits for room in the submission queue\n");
    std::_Exit(1);
  }
  teardown.join();
}

// The replies a busy worker has just queued complete as they are submitted, in the enter that
// then holds for the batch: counted toward it, 64 of them would end the hold at once
// (docs/io_uring.md, "Waiting in batches").
TEST(UringBatchWaitTest, RepliesQueuedBeforeTheWaitAreNotTheBatch) {
  if (!test_support::kernel_has_min_timeout())
    GTEST_SKIP() << "no IORING_FEAT_MIN_TIMEOUT (Linux 6.12)";
  if (!choose_backend(Backend::kIoUring).ok) GTEST_SKIP() << "io_uring unavailable";
  std::string error;
  std::unique_ptr<Poller> poller = make_uring_poller(&error, 300 * 1000);
  ASSERT_TRUE(poller) << error;
  constexpr int kPairs = 100;
  constexpr int kReplies = 80;  // more than the 64 completions a batch wait asks for
  std::vector<Receiver> targets(kPairs);
  std::vector<int> near, far;
  for (int i = 0; i < kPairs; ++i) {
    int p[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
    near.push_back(p[0]);
    far.push_back(p[1]);
    ASSERT_TRUE(poller->add(p[0], kReceiving, &targets[i]));
  }
  auto pump = [&](int timeout_ms) {
    ReadyEvent events[256];
    int n = poller->wait(timeout_ms, events, 256);
    for (int i = 0; i < n; ++i) events[i].dispatch();
    return n;
  };
  while (pump(20) > 0) {
  }
  // A batch of requests, each one received, so that the next wait may hold.
  for (int i = 0; i < kReplies; ++i) ASSERT_EQ(::send(far[i], "x", 1, MSG_NOSIGNAL), 1);
  int received = 0;
  for (int round = 0; round < 100 && received < kReplies; ++round) {
    pump(100);
    received = 0;
    for (int i = 0; i < kReplies; ++i) received += static_cast<int>(targets[i].received.size());
  }
  ASSERT_EQ(received, kReplies);
  for (int i = 0; i < kReplies; ++i) ASSERT_TRUE(poller->send(near[i], "reply"));
  const auto started = std::chrono::steady_clock::now();
  int sent = 0;
  for (int round = 0; round < 10 && sent < kReplies; ++round) {
    pump(5000);
    sent = 0;
    for (int i = 0; i < kReplies; ++i) sent += targets[i].sent;
  }
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(sent, kReplies);
  EXPECT_GE(took, std::chrono::milliseconds(250)) << "the replies' completions ended the hold";
  EXPECT_LT(took, std::chrono::seconds(3));
  poller.reset();
  for (int fd : near) ::close(fd);
  for (int fd : far) ::close(fd);
}

}  // namespace
}  // namespace peregrine::event
