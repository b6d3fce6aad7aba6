// The semantics the connections rely on (docs/io_uring.md), checked on both backends: what
// epoll does is the reference, and the io_uring poller must do the same.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "event/poller.h"
#include "loopback_listener.h"
#include "min_timeout_support.h"

namespace peregrine::event {
namespace {

struct Target : Pollable {
  void on_ready(uint32_t) override {}
};

std::unique_ptr<Poller> make(Backend backend) {
  if (backend == Backend::kEpoll) return make_epoll_poller();
  std::string error;
  std::unique_ptr<Poller> poller = make_uring_poller(&error);
  EXPECT_TRUE(poller) << error;
  return poller;
}

constexpr uint32_t kConnection = kReadable | kWritable | kEdgeTriggered;

class PollerTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kIoUring && !choose_backend(Backend::kIoUring).ok)
      GTEST_SKIP() << "io_uring unavailable: " << choose_backend(Backend::kIoUring).reason;
    poller = make(GetParam());
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair), 0);
  }
  void TearDown() override {
    for (int fd : pair)
      if (fd >= 0) ::close(fd);
    for (int fd : near) ::close(fd);
    for (int fd : far) ::close(fd);
  }

  // `count` more socket pairs, each near end registered as a connection with its own target
  // (targets[i]); all closed after the test.
  void add_pairs(int count) {
    targets = std::make_unique<Target[]>(count);
    for (int i = 0; i < count; ++i) {
      int p[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
      near.push_back(p[0]);
      far.push_back(p[1]);
      ASSERT_TRUE(poller->add(p[0], kConnection, &targets[i]));
    }
  }

  // The events one wait() reports, as (target, readiness).
  std::vector<ReadyEvent> wait(int timeout_ms = 200) {
    ReadyEvent events[16];
    int n = poller->wait(timeout_ms, events, 16);
    return std::vector<ReadyEvent>(events, events + n);
  }
  uint32_t readiness_of(const std::vector<ReadyEvent>& events, const Pollable* target) {
    uint32_t r = 0;
    for (const ReadyEvent& e : events)
      if (e.target == target) r |= e.readiness;
    return r;
  }
  void send_byte(int fd) { ASSERT_EQ(::send(fd, "x", 1, MSG_NOSIGNAL), 1); }
  // A byte to each of the first `count` pairs, and the waits that report them all.
  void fire_batch(size_t count) {
    for (size_t i = 0; i < count; ++i) send_byte(far[i]);
    size_t seen = 0;
    for (int round = 0; round < 10 && seen < count; ++round) seen += wait().size();
    ASSERT_EQ(seen, count);
  }
  void drain(int fd) {
    char buffer[4096];
    while (::recv(fd, buffer, sizeof buffer, 0) > 0) {
    }
  }

  std::unique_ptr<Poller> poller;
  int pair[2] = {-1, -1};
  Target a, b;
  std::vector<int> near, far;
  std::unique_ptr<Target[]> targets;
};

TEST_P(PollerTest, ReportsReadabilityAndWritability) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  std::vector<ReadyEvent> events = wait();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].target, &a);
  EXPECT_EQ(events[0].readiness, uint32_t{kOut});  // writable at once, nothing to read
  send_byte(pair[1]);
  events = wait();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].readiness & kIn);
}

TEST_P(PollerTest, EdgeTriggeredReportsOnlyNewInput) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  wait();  // the first report: writable
  send_byte(pair[1]);
  EXPECT_TRUE(readiness_of(wait(), &a) & kIn);
  // Not read: nothing new, no second report (epoll's EPOLLET).
  EXPECT_TRUE(wait(50).empty());
  // New bytes are a new edge, read or not; after a drain too, for as many times as it happens.
  for (int i = 0; i < 3; ++i) {
    send_byte(pair[1]);
    EXPECT_TRUE(readiness_of(wait(), &a) & kIn) << i;
    drain(pair[0]);
    EXPECT_TRUE(wait(50).empty()) << i;
  }
}

TEST_P(PollerTest, ReportsThePeersClose) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  wait();
  ::close(pair[1]);
  pair[1] = -1;
  EXPECT_TRUE(readiness_of(wait(), &a) & kHangup);
}

TEST_P(PollerTest, LevelTriggeredReportsUntilDrained) {
  ASSERT_TRUE(poller->add(pair[0], kReadable, &a));
  EXPECT_TRUE(wait(50).empty());
  send_byte(pair[1]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(readiness_of(wait(), &a), uint32_t{kIn}) << i;
  drain(pair[0]);
  EXPECT_TRUE(wait(50).empty());
  send_byte(pair[1]);
  EXPECT_EQ(readiness_of(wait(), &a), uint32_t{kIn});
}

// Readiness already reported by the kernel (queued for the next wait) when the target goes:
// the target may be freed right after remove(), so it must never be handed back.
TEST_P(PollerTest, RemoveDropsAPendingEvent) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  wait();
  send_byte(pair[1]);
  if (GetParam() == Backend::kIoUring) {
    // Let the completion reach the ring before the removal is even queued: one wait() with a
    // zero timeout would reap it, so give the kernel a moment instead.
    usleep(20 * 1000);
  }
  poller->remove(pair[0]);
  EXPECT_TRUE(wait(50).empty());
  send_byte(pair[1]);
  EXPECT_TRUE(wait(50).empty());
}

// The same descriptor number registered again for another target (a connection handed over to
// HTTP/2, or a new socket with a reused number): only the new target is reported.
TEST_P(PollerTest, ReAddAfterRemoveReportsTheNewTargetOnly) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  wait();
  send_byte(pair[1]);
  usleep(20 * 1000);
  poller->remove(pair[0]);
  ASSERT_TRUE(poller->add(pair[0], kConnection, &b));
  std::vector<ReadyEvent> events = wait();
  EXPECT_EQ(readiness_of(events, &a), 0u);
  EXPECT_TRUE(readiness_of(events, &b) & kOut);
}

TEST_P(PollerTest, CloseDropsPendingEventsAndReleasesTheSocket) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  wait();
  send_byte(pair[1]);
  usleep(20 * 1000);
  drain(pair[0]);  // (unread bytes would make the close a reset)
  poller->close(pair[0]);
  pair[0] = -1;
  // io_uring with deferred task work: the byte's wake-up is still pending when the removal is
  // submitted, which the kernel then refuses (-EALREADY); the removal asked again goes with
  // the next wait.
  EXPECT_TRUE(wait(50).empty());
  EXPECT_TRUE(wait(50).empty());
  // The peer sees the close: end-of-file, not EAGAIN (an io_uring poll left armed would keep
  // the socket open).
  char c;
  EXPECT_EQ(::recv(pair[1], &c, 1, 0), 0) << std::strerror(errno);
}

TEST_P(PollerTest, ModifyAddsWritabilityAndReportsItAtOnce) {
  ASSERT_TRUE(poller->add(pair[0], kReadable | kEdgeTriggered, &a));
  EXPECT_TRUE(wait(50).empty());  // writable, but not asked
  ASSERT_TRUE(poller->modify(pair[0], kConnection, &a));
  EXPECT_EQ(readiness_of(wait(), &a), uint32_t{kOut});  // already writable: reported, as epoll
  ASSERT_TRUE(poller->modify(pair[0], kReadable | kEdgeTriggered, &b));
  send_byte(pair[1]);
  // On io_uring the byte's pending wake-up makes the kernel refuse the update (deferred task
  // work): the poller then arms a new poll, which reports the byte with the next wait.
  std::vector<ReadyEvent> events = wait();
  if (events.empty()) events = wait();
  EXPECT_EQ(readiness_of(events, &a), 0u);
  EXPECT_EQ(readiness_of(events, &b), uint32_t{kIn});
}

TEST_P(PollerTest, ModifyOrRemoveOfAnUnknownDescriptorFails) {
  errno = 0;
  EXPECT_FALSE(poller->modify(pair[0], kConnection, &a));
  EXPECT_EQ(errno, ENOENT);
  poller->remove(pair[0]);  // harmless
  EXPECT_TRUE(wait(20).empty());
}

// One wait() reports each target once, however many wake-ups it had.
TEST_P(PollerTest, ManyWakeUpsAreOneEvent) {
  ASSERT_TRUE(poller->add(pair[0], kConnection, &a));
  wait();
  for (int i = 0; i < 5; ++i) {
    send_byte(pair[1]);
    usleep(2 * 1000);
  }
  std::vector<ReadyEvent> events = wait();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].readiness & kIn);
}

// A target's wake-ups are gathered into its own event of this wait, never into the event that
// sits where its event stood in an earlier wait (another target's now).
TEST_P(PollerTest, ManyWakeUpsGoToTheirOwnTargetsEvent) {
  add_pairs(2);
  wait();  // both writable
  send_byte(far[0]);
  std::vector<ReadyEvent> events = wait();  // targets[0] is the first event
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].target, &targets[0]);
  drain(near[0]);
  send_byte(far[1]);  // now targets[1] is reported first...
  usleep(2 * 1000);
  for (int i = 0; i < 3; ++i) {  // ...and targets[0] after it, woken three times
    send_byte(far[0]);
    usleep(2 * 1000);
  }
  events = wait();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(readiness_of(events, &targets[0]) & kIn);
  EXPECT_TRUE(readiness_of(events, &targets[1]) & kIn);
}

// More ready descriptors than one wait() may return: the rest come with the next.
TEST_P(PollerTest, CapacityLeavesTheRestForTheNextWait) {
  constexpr int kPairs = 40;
  add_pairs(kPairs);
  int seen = 0;
  for (int round = 0; round < 10 && seen < kPairs; ++round) {
    ReadyEvent events[16];
    int n = poller->wait(200, events, 16);
    EXPECT_LE(n, 16);
    seen += n;
  }
  EXPECT_EQ(seen, kPairs);
  EXPECT_TRUE(wait(20).empty());
}

// After a wait that reported a batch, the next one gathers more (the batch wait,
// docs/architecture.md): io_uring's asks the kernel for up to 64 completions, epoll's sleeps
// first when nothing is ready. A lone event must still come within that wait, not at its timeout,
// nor only once more events came.
TEST_P(PollerTest, AfterABatchALoneEventIsNotHeldForMore) {
  // Enough connections outside the batch for the next wait to gather more.
  constexpr int kPairs = 40;
  constexpr size_t kBatch = 12;
  add_pairs(kPairs);
  while (!wait(20).empty()) {
  }  // writability
  fire_batch(kBatch);
  send_byte(far[3]);
  auto started = std::chrono::steady_clock::now();
  std::vector<ReadyEvent> events = wait(5000);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].target, &targets[3]);

  fire_batch(kBatch);
  std::thread late([&] {
    usleep(200 * 1000);
    send_byte(far[5]);
  });
  ReadyEvent forever[16];
  int n = 0;
  for (int tries = 0; tries < 3 && n == 0; ++tries)  // epoll may return early with EINTR
    n = poller->wait(-1, forever, 16);
  late.join();
  ASSERT_EQ(n, 1);
  EXPECT_EQ(forever[0].target, &targets[5]);
}

// batch_wait_us: how long the wait after a batch holds while more could come. The poller of
// AfterABatchALoneEventIsNotHeldForMore holds for 100 us; one that holds for 300 ms shows the
// hold, and 0 turns it off.
class BatchWaitPollerTest : public PollerTest {
 protected:
  // How long a wait takes to report an event that comes `delay_ms` into it (0: one that is
  // ready before it starts), after a batch of `batch` events with `pairs` connections
  // registered.
  std::chrono::milliseconds lone_event_after_a_batch(unsigned batch_wait_us, int pairs = 40,
                                                     size_t batch = 12, int delay_ms = 20) {
    std::string error;
    poller = GetParam() == Backend::kEpoll ? make_epoll_poller(batch_wait_us)
                                           : make_uring_poller(&error, batch_wait_us);
    EXPECT_TRUE(poller) << error;
    if (!poller) return {};
    add_pairs(pairs);
    while (!wait(20).empty()) {
    }  // writability
    // Twice: the last of those waits held for nothing, so the next one that may hold does not
    // (BatchWaitRule).
    fire_batch(batch);
    fire_batch(batch);
    if (delay_ms == 0) send_byte(far[batch]);
    std::thread late([&] {
      if (delay_ms == 0) return;
      usleep(delay_ms * 1000);
      send_byte(far[batch]);
    });
    const auto started = std::chrono::steady_clock::now();
    std::vector<ReadyEvent> events;
    // epoll_wait may end early with EINTR: the io_uring poller of the test before leaves task
    // work on this thread.
    for (int tries = 0; tries < 3 && events.empty(); ++tries) events = wait(5000);
    const auto took = std::chrono::steady_clock::now() - started;
    late.join();
    EXPECT_EQ(events.size(), 1u);
    return std::chrono::duration_cast<std::chrono::milliseconds>(took);
  }
};

TEST_P(BatchWaitPollerTest, ALoneEventIsHeldForTheSettingsTime) {
  if (GetParam() == Backend::kIoUring && !test_support::kernel_has_min_timeout())
    GTEST_SKIP() << "no IORING_FEAT_MIN_TIMEOUT (Linux 6.12)";
  const std::chrono::milliseconds took = lone_event_after_a_batch(300 * 1000);
  EXPECT_GE(took.count(), 250);
  EXPECT_LT(took.count(), 2000);
}

// An event that is there when the wait starts is held as well: going on at once with the one
// or two ready made smaller batches and cost more per request (epoll_poller.cc).
TEST_P(BatchWaitPollerTest, AnEventReadyAlreadyIsHeldToo) {
  if (GetParam() == Backend::kIoUring && !test_support::kernel_has_min_timeout())
    GTEST_SKIP() << "no IORING_FEAT_MIN_TIMEOUT (Linux 6.12)";
  const std::chrono::milliseconds took = lone_event_after_a_batch(300 * 1000, 40, 12, 0);
  EXPECT_GE(took.count(), 250);
  EXPECT_LT(took.count(), 2000);
}

// epoll's hold is a nanosleep, which may end anywhere up to the thread's timer slack late;
// io_uring's holds for all of it, so that the two backends gather the same batches under load,
// where the nanosleep does end late (uring_poller.cc, own()).
TEST_P(BatchWaitPollerTest, TheHoldIncludesTheTimerSlack) {
  if (GetParam() == Backend::kIoUring && !test_support::kernel_has_min_timeout())
    GTEST_SKIP() << "no IORING_FEAT_MIN_TIMEOUT (Linux 6.12)";
  const int slack_ns = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  ASSERT_EQ(prctl(PR_SET_TIMERSLACK, 200'000'000UL, 0, 0, 0), 0);
  const std::chrono::milliseconds took = lone_event_after_a_batch(100 * 1000);
  prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack_ns), 0, 0, 0);
  EXPECT_GE(took.count(), GetParam() == Backend::kIoUring ? 250 : 90);
  EXPECT_LT(took.count(), 2000);
}

TEST_P(BatchWaitPollerTest, NoneAtZero) {
  EXPECT_LT(lone_event_after_a_batch(0).count(), 250);
}

// With few connections, the clients are waiting for the replies the batch sent: no hold.
TEST_P(BatchWaitPollerTest, NoneWithFewConnections) {
  EXPECT_LT(lone_event_after_a_batch(300 * 1000, 10, 8).count(), 250);
}

INSTANTIATE_TEST_SUITE_P(Backends, BatchWaitPollerTest,
                         ::testing::Values(Backend::kEpoll, Backend::kIoUring),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(info.param == Backend::kEpoll ? "Epoll" : "IoUring");
                         });

TEST_P(PollerTest, TimesOutWithNothingReady) {
  EXPECT_TRUE(wait(30).empty());
}

// TCP over loopback, as a connection lives: bytes read before the socket is registered (the
// first read after accept), then the client's FIN must be reported.
TEST_P(PollerTest, TcpFinAfterTheFirstReadIsReported) {
  sockaddr_in addr{};
  int listener = test_support::listen_on_loopback(&addr);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  for (int i = 0; i < 200; ++i) {
    int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::send(client, "GET / HT", 8, 0), 8);
    if (i % 2) ::shutdown(client, SHUT_WR);
    int server = -1;
    while ((server = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
      usleep(100);
    char buffer[64];
    while (::recv(server, buffer, sizeof buffer, 0) <= 0) usleep(100);
    ASSERT_TRUE(poller->add(server, kConnection, &a));
    if (i % 4 == 0) ::shutdown(client, SHUT_WR);
    uint32_t seen = 0;
    for (int round = 0; round < 4 && !(seen & kHangup); ++round) {
      seen |= readiness_of(wait(100), &a);
      if (i % 4 == 2) ::shutdown(client, SHUT_WR);
    }
    EXPECT_TRUE(seen & kHangup) << "connection " << i;
    poller->close(server);
    ::close(client);
    if (HasFailure()) break;
  }
  ::close(listener);
}

// A close while the peer writes: the kernel may be reporting for the poll at the very moment
// its removal arrives (io_uring answers -EALREADY, and a multishot poll goes on holding the
// socket). The socket must be gone all the same: the peer's send fails with EPIPE.
TEST_P(PollerTest, CloseWhileThePeerWritesReleasesTheSocket) {
  for (int i = 0; i < 300; ++i) {
    int p[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
    ASSERT_TRUE(poller->add(p[0], kConnection, &a));
    wait(0);
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      while (!stop.load()) {
        if (::send(p[1], "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE) break;
      }
    });
    poller->close(p[0]);
    for (int k = 0; k < 3; ++k) wait(1);
    stop.store(true);
    writer.join();
    for (int k = 0; k < 3; ++k) wait(1);
    errno = 0;
    EXPECT_EQ(::send(p[1], "x", 1, MSG_NOSIGNAL), -1) << "connection " << i;
    EXPECT_EQ(errno, EPIPE) << "connection " << i;
    ::close(p[1]);
    if (HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PollerTest,
                         ::testing::Values(Backend::kEpoll, Backend::kIoUring),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(info.param == Backend::kEpoll ? "Epoll" : "IoUring");
                         });

TEST(ChooseBackend, EpollNeedsNoProbe) {
  BackendChoice choice = choose_backend(Backend::kEpoll);
  EXPECT_EQ(choice.backend, Backend::kEpoll);
  EXPECT_TRUE(choice.ok);
  EXPECT_TRUE(choice.reason.empty());
}

TEST(ChooseBackend, AutoIsIoUringWhereARingCanBeMadeElseEpollWithAReason) {
  BackendChoice wanted = choose_backend(Backend::kIoUring);
  BackendChoice choice = choose_backend(Backend::kAuto);
  EXPECT_TRUE(choice.ok);
  if (wanted.ok) {
    EXPECT_EQ(choice.backend, Backend::kIoUring);
    EXPECT_TRUE(choice.reason.empty());
  } else {
    EXPECT_EQ(choice.backend, Backend::kEpoll);
    EXPECT_NE(choice.reason.find("io_uring_setup"), std::string::npos) << choice.reason;
  }
}

}  // namespace
}  // namespace peregrine::event
