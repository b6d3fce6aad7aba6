// Tests for a worker's live view of an upstream group (src/upstream/group_runtime.h): per-server
// slot caps, the FIFO wait queue and its timeouts, passive health, the idle keep-alive pool and
// connect_to(). Real objects throughout: an epoll poller, a TimerSet, socketpairs and sockets.
#include "upstream/group_runtime.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/clock.h"
#include "event/deferred.h"
#include "event/poller.h"
#include "event/timer_set.h"

namespace peregrine::upstream {
namespace {

using Acquire = GroupRuntime::Acquire;

// Requests holding a slot of `server`: the balancer's count, which acquire() and release() keep.
size_t in_use(GroupRuntime& g, size_t server) {
  return static_cast<size_t>(g.upstream().group().active(server));
}

config::UpstreamServer unix_server(const std::string& path, uint32_t max_conns = 0) {
  config::UpstreamServer s;
  s.address = "unix:" + path;
  auto* un = reinterpret_cast<sockaddr_un*>(&s.addr);
  un->sun_family = AF_UNIX;
  std::strncpy(un->sun_path, path.c_str(), sizeof un->sun_path - 1);
  s.addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  s.max_conns = max_conns;
  return s;
}

config::UpstreamServer tcp_server(uint16_t port, uint32_t max_conns = 0) {
  config::UpstreamServer s;
  s.address = "127.0.0.1:" + std::to_string(port);
  auto* in = reinterpret_cast<sockaddr_in*>(&s.addr);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  s.addr_len = sizeof(sockaddr_in);
  s.max_conns = max_conns;
  return s;
}

bool fd_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

// True when the other end of a socketpair was closed: a read returns end of file, or a reset
// when the closed end had unread data.
bool peer_closed(int fd) {
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// A waiter that records what happened to it, and optionally takes the slot it is offered.
class TestWaiter final : public Waiter {
 public:
  TestWaiter(int id, std::vector<int>* log) : id_(id), log_(log) {}
  ~TestWaiter() {
    if (queued_in) queued_in->cancel(*this);  // a failed assertion may leave it queued
  }

  void on_slot_ready() override {
    ++ready;
    if (log_) log_->push_back(id_);
    if (group && reacquire) {
      server = SIZE_MAX;
      last = group->acquire(PickContext{now, {}, {}}, tried, *this, &server);
    }
  }
  void on_queue_timeout() override {
    ++timeouts;
    if (log_) log_->push_back(-id_);
  }

  int ready = 0;
  int timeouts = 0;
  // Re-acquire on on_slot_ready() like the FastCGI and proxy exchanges do.
  GroupRuntime* group = nullptr;
  bool reacquire = true;
  int64_t now = 0;
  TriedSet tried;
  Acquire last = Acquire::kUnavailable;
  size_t server = SIZE_MAX;

 private:
  int id_;
  std::vector<int>* log_;
};

class GroupRuntimeTest : public ::testing::Test {
 protected:
  GroupRuntimeTest() : poller_(event::make_epoll_poller()) { clock_.monotonic_ms = 100'000; }

  ~GroupRuntimeTest() override {
    runtime_.reset();
    event::dispose_pending();
    for (int fd : fds_) ::close(fd);
    for (int fd : peers_) ::close(fd);
    if (!dir_.empty()) {
      for (const std::string& p : paths_) ::unlink(p.c_str());
      ::rmdir(dir_.c_str());
    }
  }

  GroupRuntime& make(int workers = 1) {
    runtime_ = std::make_unique<GroupRuntime>(group_, *poller_, timers_, clock_, workers);
    return *runtime_;
  }

  PickContext now() const { return PickContext{clock_.monotonic_ms, {}, {}}; }
  TriedSet none() const { return TriedSet(group_.servers.size()); }

  Acquire acquire(TestWaiter& w, size_t* server) {
    return runtime_->acquire(now(), none(), w, server);
  }

  // A connected socketpair; returns the end for the pool and the peer in *peer, which the
  // fixture closes at the end unless the test does with close_peer().
  int pair(int* peer) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    *peer = sv[1];
    peers_.push_back(sv[1]);
    return sv[0];
  }

  void close_peer(int peer) {
    std::erase(peers_, peer);
    ::close(peer);
  }

  // Polls without blocking and hands every event to its target, as a worker's loop does, then
  // frees what the handlers disposed of. Returns the number of events.
  int pump() {
    event::ReadyEvent events[32];
    int n = poller_->wait(0, events, 32);
    for (int i = 0; i < n; ++i) events[i].dispatch();
    event::dispose_pending();
    return n;
  }

  std::string temp_dir() {
    if (dir_.empty()) {
      char tmpl[] = "/tmp/peregrine-gr-XXXXXX";
      EXPECT_NE(::mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
    }
    return dir_;
  }

  // A listening unix socket at dir/name.
  int listen_unix(const std::string& name, int backlog, std::string* path) {
    *path = temp_dir() + "/" + name;
    paths_.push_back(*path);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    config::UpstreamServer s = unix_server(*path);
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&s.addr), s.addr_len), 0)
        << std::strerror(errno);
    if (backlog >= 0) {
      EXPECT_EQ(::listen(fd, backlog), 0);
    }
    fds_.push_back(fd);
    return fd;
  }

  config::UpstreamGroup group_;
  std::unique_ptr<event::Poller> poller_;
  event::TimerSet timers_;
  Clock clock_;
  std::unique_ptr<GroupRuntime> runtime_;
  std::vector<int> fds_;
  std::vector<int> peers_;
  std::string dir_;
  std::vector<std::string> paths_;
};

// ---------------------------------------------------------------------------------------------
// Caps.

TEST_F(GroupRuntimeTest, CapIsMaxConnsDividedByWorkersRoundedDownAtLeastOne) {
  group_.name = "caps";
  group_.servers = {unix_server("/a", 10), unix_server("/b", 3), unix_server("/c", 0),
                    unix_server("/d", 8),  unix_server("/e", 7), unix_server("/f", 1)};
  GroupRuntime& g = make(4);
  EXPECT_EQ(g.cap(0), 2u);  // 10 / 4 = 2.5, rounded down
  EXPECT_EQ(g.cap(1), 1u);  // 3 / 4 = 0.75: at least one per worker
  EXPECT_EQ(g.cap(2), 0u);  // unlimited stays unlimited
  EXPECT_EQ(g.cap(3), 2u);
  EXPECT_EQ(g.cap(4), 1u);  // 7 / 4 = 1.75
  EXPECT_EQ(g.cap(5), 1u);
}

// A FastCGI group without `keepalive`: the workers together keep idle at most max_conns less a
// quarter (at least one), so a client of the same php-fpm pool finds a child free.
TEST_F(GroupRuntimeTest, FastcgiIdleLimitLeavesChildrenToOtherClients) {
  group_.keepalive_leaves_children = true;
  group_.servers = {unix_server("/a", 4), unix_server("/b", 16), unix_server("/c", 1),
                    unix_server("/d", 0)};
  GroupRuntime& one = make(1);
  EXPECT_EQ(one.idle_limit(0), 3u);     // 4 children: one left free
  EXPECT_EQ(one.idle_limit(1), 12u);    // 16: a quarter left free
  EXPECT_EQ(one.idle_limit(2), 0u);     // a lone child is never held idle
  EXPECT_EQ(one.idle_limit(3), 1024u);  // no cap: `keepalive` (FastCGI then keeps nothing)
  GroupRuntime& four = make(4);
  EXPECT_EQ(four.idle_limit(0), 0u);  // 3 to share among 4 workers
  EXPECT_EQ(four.idle_limit(1), 3u);  // 12 / 4
  group_.keepalive_leaves_children = false;
  group_.keepalive = 5;
  EXPECT_EQ(make(4).idle_limit(1), 5u);  // written: as written
}

TEST_F(GroupRuntimeTest, CapWithOneOrNoWorkerCountIsTheWholeMaxConns) {
  group_.servers = {unix_server("/a", 7)};
  EXPECT_EQ(make(1).cap(0), 7u);
  EXPECT_EQ(make(0).cap(0), 7u);  // a worker count of 0 is treated as 1
  EXPECT_EQ(make(2).cap(0), 3u);
}

TEST_F(GroupRuntimeTest, AcquireIsReadyUntilTheCapThenQueued) {
  group_.servers = {unix_server("/a", 6)};
  GroupRuntime& g = make(2);  // cap 3
  ASSERT_EQ(g.cap(0), 3u);
  TestWaiter w1(1, nullptr), w2(2, nullptr), w3(3, nullptr), w4(4, nullptr);
  size_t server = 99;
  EXPECT_EQ(acquire(w1, &server), Acquire::kReady);
  EXPECT_EQ(server, 0u);
  EXPECT_EQ(acquire(w2, &server), Acquire::kReady);
  EXPECT_EQ(acquire(w3, &server), Acquire::kReady);
  EXPECT_EQ(in_use(g, 0), 3u);
  EXPECT_EQ(g.upstream().group().active(0), 3);  // least-connections bookkeeping follows
  EXPECT_EQ(g.queued(), 0u);
  EXPECT_EQ(w1.queued_in, nullptr);

  EXPECT_EQ(acquire(w4, &server), Acquire::kQueued);
  EXPECT_EQ(in_use(g, 0), 3u);
  EXPECT_EQ(g.queued(), 1u);
  EXPECT_EQ(w4.queued_in, &g);
  EXPECT_TRUE(w4.queue_timer.armed());
  g.cancel(w4);
}

TEST_F(GroupRuntimeTest, UnlimitedServerNeverQueues) {
  group_.servers = {unix_server("/a", 0)};
  GroupRuntime& g = make(4);
  TestWaiter w(1, nullptr);
  size_t server;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(acquire(w, &server), Acquire::kReady) << i;
  EXPECT_EQ(in_use(g, 0), 100u);
  EXPECT_EQ(g.queued(), 0u);
}

TEST_F(GroupRuntimeTest, FullServerIsSkippedForAnotherWithRoom) {
  group_.servers = {unix_server("/a", 1), unix_server("/b", 2)};
  GroupRuntime& g = make(1);
  TestWaiter w(1, nullptr);
  size_t s1, s2, s3;
  ASSERT_EQ(acquire(w, &s1), Acquire::kReady);
  ASSERT_EQ(acquire(w, &s2), Acquire::kReady);
  ASSERT_EQ(acquire(w, &s3), Acquire::kReady);
  EXPECT_EQ(in_use(g, 0), 1u);
  EXPECT_EQ(in_use(g, 1), 2u);
  EXPECT_EQ(acquire(w, &s1), Acquire::kQueued);  // both full now
  g.cancel(w);
}

TEST_F(GroupRuntimeTest, ReleaseGivesTheSlotBack) {
  group_.servers = {unix_server("/a", 1)};
  GroupRuntime& g = make(1);
  TestWaiter w(1, nullptr);
  size_t server;
  ASSERT_EQ(acquire(w, &server), Acquire::kReady);
  g.release(server);
  EXPECT_EQ(in_use(g, 0), 0u);
  EXPECT_EQ(g.upstream().group().active(0), 0);
  EXPECT_EQ(acquire(w, &server), Acquire::kReady);
  g.release(server);
  g.release(server);  // one release too many never goes below zero
  EXPECT_EQ(in_use(g, 0), 0u);
  EXPECT_EQ(acquire(w, &server), Acquire::kReady);
  EXPECT_EQ(acquire(w, &server), Acquire::kQueued);
  g.cancel(w);
}

// The admin's drain is set on one thread, and each worker hears of it through its mailbox, later.
// A request sent after the admin's answer may reach a worker before that news: its pick must
// already see the drain (test_admin_live's drain test once got the drained server that way).
TEST_F(GroupRuntimeTest, APickSeesADrainBeforeTheWorkerHearsOfIt) {
  group_.name = "drained-before-the-news";
  group_.servers = {unix_server("/a"), unix_server("/b")};
  GroupRuntime& g = make(1);
  operator_states().set(group_.name, "unix:/a", OperatorState::kDrained);  // no apply here
  TestWaiter w(1, nullptr);
  for (int i = 0; i < 4; ++i) {
    size_t server = 99;
    ASSERT_EQ(acquire(w, &server), Acquire::kReady);
    EXPECT_EQ(server, 1u) << i;
    g.release(server);
  }
  EXPECT_EQ(g.operator_state(0), OperatorState::kDrained);
  operator_states().set(group_.name, "unix:/a", OperatorState::kNone);  // the table is global
}

// ---------------------------------------------------------------------------------------------
// The wait queue.

TEST_F(GroupRuntimeTest, ReleaseWakesTheFirstWaiterInFifoOrder) {
  group_.servers = {unix_server("/a", 1)};
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter holder(0, &log), w1(1, &log), w2(2, &log), w3(3, &log);
  for (TestWaiter* w : {&w1, &w2, &w3}) {
    w->group = &g;
    w->now = clock_.monotonic_ms;
    w->tried = none();
  }
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  ASSERT_EQ(acquire(w1, &server), Acquire::kQueued);
  ASSERT_EQ(acquire(w2, &server), Acquire::kQueued);
  ASSERT_EQ(acquire(w3, &server), Acquire::kQueued);
  EXPECT_EQ(g.queued(), 3u);

  g.release(0);  // the holder is done: w1, and only w1, is offered the slot
  EXPECT_EQ(log, std::vector<int>({1}));
  EXPECT_EQ(w1.ready, 1);
  EXPECT_EQ(w1.last, Acquire::kReady);
  EXPECT_EQ(w1.server, 0u);
  EXPECT_EQ(w1.queued_in, nullptr);
  EXPECT_FALSE(w1.queue_timer.armed());
  EXPECT_EQ(g.queued(), 2u);
  EXPECT_EQ(in_use(g, 0), 1u);

  g.release(0);
  g.release(0);
  EXPECT_EQ(log, std::vector<int>({1, 2, 3}));
  EXPECT_EQ(g.queued(), 0u);
  EXPECT_EQ(in_use(g, 0), 1u);  // w3 holds it now

  g.release(0);  // nobody waits any more
  EXPECT_EQ(log, std::vector<int>({1, 2, 3}));
  EXPECT_EQ(in_use(g, 0), 0u);
}

TEST_F(GroupRuntimeTest, WokenWaiterFindsTheSlotAlreadyFree) {
  group_.servers = {unix_server("/a", 1)};
  GroupRuntime& g = make(1);
  TestWaiter holder(0, nullptr), w(1, nullptr);
  w.reacquire = false;
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  ASSERT_EQ(acquire(w, &server), Acquire::kQueued);
  g.release(0);
  EXPECT_EQ(w.ready, 1);
  EXPECT_EQ(in_use(g, 0), 0u);  // freed before the waiter was told
  EXPECT_EQ(g.queued(), 0u);
  EXPECT_EQ(acquire(w, &server), Acquire::kReady);
}

TEST_F(GroupRuntimeTest, CancelRemovesAWaiterFromAnyPosition) {
  group_.servers = {unix_server("/a", 1)};
  group_.queue_timeout = config::Millis(1000);
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter holder(0, &log), w1(1, &log), w2(2, &log), w3(3, &log), w4(4, &log);
  for (TestWaiter* w : {&w1, &w2, &w3, &w4}) w->reacquire = false;
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  for (TestWaiter* w : {&w1, &w2, &w3, &w4}) ASSERT_EQ(acquire(*w, &server), Acquire::kQueued);

  g.cancel(w2);  // middle
  EXPECT_EQ(g.queued(), 3u);
  EXPECT_EQ(w2.queued_in, nullptr);
  EXPECT_FALSE(w2.queue_timer.armed());
  g.cancel(w2);  // not queued any more: harmless
  EXPECT_EQ(g.queued(), 3u);
  g.cancel(w4);  // tail
  g.cancel(w1);  // head
  EXPECT_EQ(g.queued(), 1u);
  TestWaiter never(5, &log);
  g.cancel(never);  // never queued
  EXPECT_EQ(g.queued(), 1u);

  // Cancelled waiters neither time out nor get woken.
  timers_.run(clock_.monotonic_ms + 5000);
  EXPECT_EQ(log, std::vector<int>({-3}));
  g.release(0);
  g.release(0);
  EXPECT_EQ(log, std::vector<int>({-3}));
  EXPECT_EQ(w1.ready + w2.ready + w4.ready, 0);
}

TEST_F(GroupRuntimeTest, CancelledWaiterCanQueueAgainAtTheBack) {
  group_.servers = {unix_server("/a", 1)};
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter holder(0, &log), w1(1, &log), w2(2, &log);
  w1.reacquire = w2.reacquire = false;
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  ASSERT_EQ(acquire(w1, &server), Acquire::kQueued);
  ASSERT_EQ(acquire(w2, &server), Acquire::kQueued);
  g.cancel(w1);
  ASSERT_EQ(acquire(w1, &server), Acquire::kQueued);
  g.release(0);
  // w2 (now first) is woken first; it leaves the slot unused, so w1 is woken next.
  EXPECT_EQ(log, std::vector<int>({2, 1}));
  g.cancel(w1);
}

// A request that lost its place through no fault of its own (FastCGI pipelining) waits first.
TEST_F(GroupRuntimeTest, FirstInLineQueuesAtTheFront) {
  group_.servers = {unix_server("/a", 1)};
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter holder(0, &log), w1(1, &log), w2(2, &log), w3(3, &log);
  for (TestWaiter* w : {&w1, &w2, &w3}) w->reacquire = false;
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  ASSERT_EQ(acquire(w1, &server), Acquire::kQueued);
  ASSERT_EQ(acquire(w2, &server), Acquire::kQueued);
  ASSERT_EQ(g.acquire(now(), none(), w3, &server, /*first_in_line=*/true), Acquire::kQueued);
  EXPECT_EQ(g.queued(), 3u);
  // Each wake-up leaves the slot unused, so all three are woken, front first.
  g.release(0);
  EXPECT_EQ(log, std::vector<int>({3, 1, 2}));
}

TEST_F(GroupRuntimeTest, FindWaiterLooksAtTheFirstFewInOrderWithoutDequeuing) {
  group_.servers = {unix_server("/a", 1)};
  GroupRuntime& g = make(1);
  TestWaiter holder(0, nullptr), w1(1, nullptr), w2(2, nullptr), w3(3, nullptr);
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  for (TestWaiter* w : {&w1, &w2, &w3}) ASSERT_EQ(acquire(*w, &server), Acquire::kQueued);
  auto is = [](const TestWaiter& want) { return [&want](Waiter& w) { return &w == &want; }; };
  EXPECT_EQ(g.find_waiter(is(w2), 8), &w2);
  EXPECT_EQ(g.find_waiter(is(w3), 2), nullptr);  // beyond the limit
  EXPECT_EQ(g.find_waiter([](Waiter&) { return true; }, 8), &w1);
  EXPECT_EQ(g.find_waiter([](Waiter&) { return false; }, 8), nullptr);
  EXPECT_EQ(g.queued(), 3u);
  for (TestWaiter* w : {&w1, &w2, &w3}) g.cancel(*w);
}

// A follower leaves the queue but keeps its deadline: it waits no longer than it would have.
TEST_F(GroupRuntimeTest, CancelKeepingTheDeadlineStillTimesOut) {
  group_.servers = {unix_server("/a", 1)};
  group_.queue_timeout = config::Millis(500);
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter holder(0, &log), w1(1, &log), w2(2, &log);
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  const int64_t t0 = clock_.monotonic_ms;
  ASSERT_EQ(acquire(w1, &server), Acquire::kQueued);
  ASSERT_EQ(acquire(w2, &server), Acquire::kQueued);
  g.cancel(w1, /*keep_deadline=*/true);
  g.cancel(w2, /*keep_deadline=*/true);
  EXPECT_EQ(g.queued(), 0u);
  EXPECT_EQ(w1.queued_in, nullptr);
  EXPECT_TRUE(w1.queue_timer.armed());
  event::TimerList::disarm(w2.queue_timer);  // w2 got served meanwhile
  g.release(0);                              // wakes nobody: neither is queued
  EXPECT_TRUE(log.empty());
  timers_.run(t0 + 499);
  EXPECT_TRUE(log.empty());
  timers_.run(t0 + 500);
  EXPECT_EQ(log, std::vector<int>({-1}));
}

TEST_F(GroupRuntimeTest, QueueFullIsRefused) {
  group_.servers = {unix_server("/a", 1)};
  group_.queue = 2;
  GroupRuntime& g = make(1);
  TestWaiter holder(0, nullptr), w1(1, nullptr), w2(2, nullptr), w3(3, nullptr);
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  EXPECT_EQ(acquire(w1, &server), Acquire::kQueued);
  EXPECT_EQ(acquire(w2, &server), Acquire::kQueued);
  ASSERT_EQ(acquire(w3, &server), Acquire::kQueueFull);
  EXPECT_EQ(g.queued(), 2u);
  EXPECT_EQ(w3.queued_in, nullptr);
  EXPECT_FALSE(w3.queue_timer.armed());
  g.cancel(w1);  // room again
  EXPECT_EQ(acquire(w3, &server), Acquire::kQueued);
  g.cancel(w2);
  g.cancel(w3);
}

TEST_F(GroupRuntimeTest, ZeroQueueRefusesAtOnce) {
  group_.servers = {unix_server("/a", 1)};
  group_.queue = 0;
  GroupRuntime& g = make(1);
  TestWaiter w(1, nullptr);
  size_t server;
  ASSERT_EQ(acquire(w, &server), Acquire::kReady);
  EXPECT_EQ(acquire(w, &server), Acquire::kQueueFull);
  EXPECT_EQ(g.queued(), 0u);
}

TEST_F(GroupRuntimeTest, QueueTimeoutFiresAfterTheDeadline) {
  group_.servers = {unix_server("/a", 1)};
  group_.queue_timeout = config::Millis(500);
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter holder(0, &log), w1(1, &log), w2(2, &log);
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  const int64_t t0 = clock_.monotonic_ms;
  ASSERT_EQ(acquire(w1, &server), Acquire::kQueued);
  clock_.monotonic_ms = t0 + 200;
  ASSERT_EQ(acquire(w2, &server), Acquire::kQueued);
  EXPECT_EQ(timers_.next_in(t0), 500);

  timers_.run(t0 + 499);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(g.queued(), 2u);

  timers_.run(t0 + 500);
  EXPECT_EQ(log, std::vector<int>({-1}));
  EXPECT_EQ(w1.timeouts, 1);
  EXPECT_EQ(w1.queued_in, nullptr);  // it has left the queue when told
  EXPECT_EQ(g.queued(), 1u);

  timers_.run(t0 + 699);
  EXPECT_EQ(log, std::vector<int>({-1}));
  timers_.run(t0 + 10'000);
  EXPECT_EQ(log, std::vector<int>({-1, -2}));
  EXPECT_EQ(g.queued(), 0u);

  g.release(0);  // nobody left to wake
  EXPECT_EQ(w1.ready + w2.ready, 0);
  EXPECT_EQ(w1.timeouts, 1);
}

TEST_F(GroupRuntimeTest, WokenWaiterDoesNotTimeOutLater) {
  group_.servers = {unix_server("/a", 1)};
  group_.queue_timeout = config::Millis(500);
  GroupRuntime& g = make(1);
  TestWaiter holder(0, nullptr), w(1, nullptr);
  w.group = &g;
  w.now = clock_.monotonic_ms;
  w.tried = none();
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  ASSERT_EQ(acquire(w, &server), Acquire::kQueued);
  g.release(0);
  ASSERT_EQ(w.last, Acquire::kReady);
  timers_.run(clock_.monotonic_ms + 10'000);
  EXPECT_EQ(w.timeouts, 0);
}

// A retry that already tried the server whose slot frees cannot use it; the slot must not sit
// idle while a waiter behind it could take it (the FastCGI and proxy exchanges queue retries
// with their TriedSet, and re-queue when on_slot_ready()'s acquire() says kQueued).
TEST_F(GroupRuntimeTest, SlotFreedForAWaiterThatCannotUseItGoesToTheNextWaiter) {
  group_.servers = {unix_server("/a", 1), unix_server("/b", 1)};
  GroupRuntime& g = make(1);
  std::vector<int> log;
  TestWaiter h0(0, &log), h1(0, &log), retry(1, &log), fresh(2, &log);
  size_t s0, s1;
  ASSERT_EQ(acquire(h0, &s0), Acquire::kReady);
  ASSERT_EQ(acquire(h1, &s1), Acquire::kReady);
  ASSERT_NE(s0, s1);
  const size_t a = s0;  // the server the retry already failed on

  retry.group = fresh.group = &g;
  retry.now = fresh.now = clock_.monotonic_ms;
  retry.tried = none();
  retry.tried.insert(a);
  fresh.tried = none();
  size_t server;
  ASSERT_EQ(g.acquire(now(), retry.tried, retry, &server), Acquire::kQueued);
  ASSERT_EQ(g.acquire(now(), fresh.tried, fresh, &server), Acquire::kQueued);

  g.release(a);  // `retry` cannot use a; `fresh` can
  EXPECT_EQ(retry.last, Acquire::kQueued);
  EXPECT_EQ(fresh.ready, 1) << "server " << a << " is free but the waiter that could use it "
                            << "was not woken (in_use=" << in_use(g, a) << ")";
  EXPECT_EQ(fresh.last, Acquire::kReady);
  EXPECT_EQ(in_use(g, a), 1u);
  g.cancel(retry);
  g.cancel(fresh);
}

// ---------------------------------------------------------------------------------------------
// Passive health.

TEST_F(GroupRuntimeTest, UnavailableWhenEveryServerIsDown) {
  group_.servers = {unix_server("/a", 1), unix_server("/b", 1)};
  group_.max_fails = 2;
  group_.fail_timeout = config::Millis(10'000);
  GroupRuntime& g = make(1);
  TestWaiter w(1, nullptr);
  size_t server;

  g.report_failure(0, "test");
  ASSERT_EQ(acquire(w, &server), Acquire::kReady);  // one failure of two: still up
  g.release(server);
  g.report_failure(0, "test");  // a is down now
  EXPECT_FALSE(g.upstream().group().is_up(0, clock_.monotonic_ms));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(acquire(w, &server), Acquire::kReady);
    EXPECT_EQ(server, 1u);
    g.release(server);
  }
  g.report_failure(1, "test");
  g.report_failure(1, "test");
  EXPECT_EQ(acquire(w, &server), Acquire::kUnavailable);
  EXPECT_EQ(g.queued(), 0u);  // never queued for servers that are down
  EXPECT_EQ(w.queued_in, nullptr);

  // Back after fail_timeout.
  clock_.monotonic_ms += 10'000;
  EXPECT_EQ(acquire(w, &server), Acquire::kReady);
}

TEST_F(GroupRuntimeTest, DownServersAndFullServersQueueRatherThanFail) {
  group_.servers = {unix_server("/a", 1), unix_server("/b", 1)};
  group_.max_fails = 1;
  GroupRuntime& g = make(1);
  TestWaiter w(1, nullptr);
  size_t server;
  g.report_failure(1, "test");
  ASSERT_EQ(acquire(w, &server), Acquire::kReady);
  EXPECT_EQ(server, 0u);
  EXPECT_EQ(acquire(w, &server), Acquire::kQueued);  // a is full, b is down: wait for a
  g.cancel(w);
}

TEST_F(GroupRuntimeTest, LoneServerIsNeverMarkedDown) {
  group_.servers = {unix_server("/a", 0)};
  group_.max_fails = 1;
  GroupRuntime& g = make(1);
  for (int i = 0; i < 10; ++i) g.report_failure(0, "test");
  EXPECT_TRUE(g.upstream().group().is_up(0, clock_.monotonic_ms));
  EXPECT_EQ(g.upstream().group().fails(0), 0);
  TestWaiter w(1, nullptr);
  size_t server;
  EXPECT_EQ(acquire(w, &server), Acquire::kReady);
  EXPECT_EQ(server, 0u);
}

TEST_F(GroupRuntimeTest, ProbeDownServersAreUnavailable) {
  group_.servers = {unix_server("/a", 0), unix_server("/b", 0)};
  GroupRuntime& g = make(1);
  TestWaiter w(1, nullptr);
  size_t server;
  g.set_probe_up(0, false);
  g.set_probe_up(1, false);
  EXPECT_EQ(acquire(w, &server), Acquire::kUnavailable);
  g.set_probe_up(1, true);
  EXPECT_EQ(acquire(w, &server), Acquire::kReady);
  EXPECT_EQ(server, 1u);
}

TEST_F(GroupRuntimeTest, DestructionLeavesNoWaiterLinked) {
  group_.servers = {unix_server("/a", 1)};
  TestWaiter holder(0, nullptr), w(1, nullptr);
  make(1);
  size_t server;
  ASSERT_EQ(acquire(holder, &server), Acquire::kReady);
  ASSERT_EQ(acquire(w, &server), Acquire::kQueued);
  runtime_.reset();
  EXPECT_EQ(w.queued_in, nullptr);
  EXPECT_FALSE(w.queue_timer.armed());
}

// ---------------------------------------------------------------------------------------------
// UpstreamConnection: open(), take_idle(server, user), put_idle(c), close(c). The connection
// stays registered with the poller; readiness goes to its user, or closes it while idle.

struct RecordingUser final : event::Pollable {
  int events = 0;
  uint32_t readiness = 0;
  int sent = 0;  // on_sent(true) calls
  void on_ready(uint32_t r) override {
    ++events;
    readiness |= r;
  }
  void on_sent(bool ok) override { sent += ok ? 1 : 0; }
};

class GroupRuntimeConnectionTest : public GroupRuntimeTest {
 protected:
  // A group of one unix server (a listening socket in the temp dir) and its runtime.
  GroupRuntime& make_listening(uint32_t max_conns = 0) {
    std::string path;
    listener_ = listen_unix("upstream.sock", 64, &path);
    group_.servers = {unix_server(path, max_conns)};
    return make(1);
  }
  // The back end's end of the latest connection.
  int accept_peer() {
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    if (fd >= 0) peers_.push_back(fd);
    return fd;
  }
  // A group of `n` unix servers, each a listening socket of its own.
  GroupRuntime& make_listening_servers(size_t n, uint32_t max_conns = 0) {
    group_.servers.clear();
    for (size_t i = 0; i < n; ++i) {
      std::string path;
      listeners_.push_back(listen_unix("upstream" + std::to_string(i) + ".sock", 64, &path));
      group_.servers.push_back(unix_server(path, max_conns));
    }
    listener_ = listeners_[0];
    return make(1);
  }
  // A connection to server `s` through the group, and the back end's end of it in *peer.
  UpstreamConnection* connect(GroupRuntime& g, size_t s, int* peer) {
    UpstreamConnection* c = g.open(s, user_);
    EXPECT_NE(c, nullptr) << std::strerror(errno);
    int saved = listener_;
    listener_ = listeners_.empty() ? listener_ : listeners_[s];
    *peer = accept_peer();
    listener_ = saved;
    return c;
  }
  // A connection to server 0 that has been used and put back in the pool.
  UpstreamConnection* pooled(GroupRuntime& g, int* peer) {
    UpstreamConnection* c = connect(g, 0, peer);
    if (!c) return nullptr;
    pump();
    g.put_idle(c);
    return c;
  }
  // Takes every idle connection of `server` (most recently used first), checks that they are
  // `expected`, and closes them.
  void expect_pool_and_close(GroupRuntime& g, size_t server,
                             const std::vector<UpstreamConnection*>& expected) {
    std::vector<UpstreamConnection*> taken;
    while (UpstreamConnection* c = g.take_idle(server, user_)) taken.push_back(c);
    EXPECT_EQ(taken, expected);
    for (UpstreamConnection* c : taken) g.close(c);
    event::dispose_pending();
  }
  int listener_ = -1;
  std::vector<int> listeners_;
  RecordingUser user_;
};

TEST_F(GroupRuntimeConnectionTest, OpenedConnectionPassesReadinessToItsUser) {
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr) << std::strerror(errno);
  EXPECT_GE(c->fd(), 0);
  EXPECT_EQ(c->server(), 0u);
  EXPECT_EQ(c->uses(), 0u);
  EXPECT_FALSE(c->reused());
  int peer = accept_peer();
  ASSERT_GE(pump(), 1);  // connected: writable
  EXPECT_GE(user.events, 1);
  EXPECT_TRUE(user.readiness & event::kOut);

  user = RecordingUser();
  ASSERT_EQ(::send(peer, "hi", 2, MSG_NOSIGNAL), 2);
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(user.events, 1);
  EXPECT_TRUE(user.readiness & event::kIn);
  EXPECT_EQ(g.take_idle(0, user), nullptr);  // in use: not pooled
  g.close(c);
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(peer));
}

TEST_F(GroupRuntimeConnectionTest, PooledConnectionGoesToItsNextUser) {
  GroupRuntime& g = make_listening();
  RecordingUser first, second;
  UpstreamConnection* c = g.open(0, first);
  ASSERT_NE(c, nullptr);
  const int fd = c->fd();
  int peer = accept_peer();
  pump();
  g.put_idle(c);
  EXPECT_GE(c->fd(), 0);  // pooled, not closed
  EXPECT_EQ(c->uses(), 1u);
  EXPECT_EQ(pump(), 0);

  UpstreamConnection* again = g.take_idle(0, second);
  ASSERT_EQ(again, c);
  EXPECT_EQ(again->fd(), fd);
  EXPECT_TRUE(again->reused());
  EXPECT_EQ(g.take_idle(0, second), nullptr);

  first = RecordingUser();
  ASSERT_EQ(::send(peer, "x", 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(first.events, 0);
  EXPECT_EQ(second.events, 1);
  EXPECT_TRUE(fd_open(fd));  // in use: data is the user's business, not a reason to close
  g.close(again);
  event::dispose_pending();
}

// io_uring: a request handed to the poller goes out with the next wait, one at a time, and its
// end reaches the user; a connection whose send is still on its way never goes to the pool.
TEST_F(GroupRuntimeConnectionTest, ARingSendGoesWithTheWaitAndKeepsItsConnectionFromThePool) {
  std::string error;
  poller_ = event::make_uring_poller(&error);
  ASSERT_TRUE(poller_) << error;
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr) << std::strerror(errno);
  int peer = accept_peer();
  pump();  // connected
  ASSERT_TRUE(c->send_with_wait("request"));
  EXPECT_TRUE(c->sending());
  EXPECT_FALSE(c->send_with_wait("more"));  // one at a time: the caller waits for on_sent
  char buffer[16];
  EXPECT_EQ(::recv(peer, buffer, sizeof buffer, MSG_DONTWAIT), -1);  // not before the wait
  for (int i = 0; i < 100 && user.sent == 0; ++i) pump();
  EXPECT_EQ(user.sent, 1);
  EXPECT_FALSE(c->sending());
  ASSERT_EQ(::recv(peer, buffer, sizeof buffer, MSG_DONTWAIT), 7);
  EXPECT_EQ(std::string(buffer, 7), "request");
  g.put_idle(c);
  ASSERT_EQ(g.take_idle(0, user), c);  // sent: pooled and taken again

  ASSERT_TRUE(c->send_with_wait("second"));
  g.put_idle(c);  // its send still on its way: closed, not pooled
  EXPECT_EQ(g.take_idle(0, user), nullptr);
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    pump();
    closed = peer_closed(peer);  // (reads past what the cancelled send may have delivered)
  }
  EXPECT_TRUE(closed);
  EXPECT_EQ(user.sent, 1);  // a closed connection's send is nobody's news
}

TEST_F(GroupRuntimeConnectionTest, HandOverPassesReadinessToTheNextUserAndCountsAUse) {
  GroupRuntime& g = make_listening();
  RecordingUser first, second;
  UpstreamConnection* c = g.open(0, first);
  ASSERT_NE(c, nullptr);
  int peer = accept_peer();
  pump();
  g.hand_over(c, second);
  EXPECT_EQ(c->uses(), 1u);
  EXPECT_TRUE(c->reused());
  EXPECT_EQ(g.take_idle(0, second), nullptr);  // in use all along: never pooled
  first = RecordingUser();
  ASSERT_EQ(::send(peer, "x", 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(first.events, 0);
  EXPECT_EQ(second.events, 1);
  g.close(c);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, IdleConnectionClosedByTheBackEndLeavesThePool) {
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr);
  const int fd = c->fd();
  int peer = accept_peer();
  pump();
  g.put_idle(c);
  user = RecordingUser();
  close_peer(peer);
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(user.events, 0);  // not the previous user's business any more
  EXPECT_FALSE(fd_open(fd));
  EXPECT_EQ(g.take_idle(0, user), nullptr);
}

// io_uring reports readiness as it was when bytes arrived: a report can come after the last
// exchange read them and the connection went idle. Only what the socket holds counts.
TEST_F(GroupRuntimeConnectionTest, StaleReadableReportKeepsAnIdleConnection) {
  GroupRuntime& g = make_listening();
  int peer = -1;
  UpstreamConnection* c = pooled(g, &peer);
  ASSERT_NE(c, nullptr);
  static_cast<event::Pollable*>(c)->on_ready(event::kIn);
  event::dispose_pending();
  UpstreamConnection* again = g.take_idle(0, user_);
  EXPECT_EQ(again, c);
  EXPECT_FALSE(peer_closed(peer));
  if (again) g.close(again);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, BytesOnAnIdleConnectionCloseIt) {
  GroupRuntime& g = make_listening();
  int peer = -1;
  ASSERT_NE(pooled(g, &peer), nullptr);
  ASSERT_EQ(::send(peer, "x", 1, MSG_NOSIGNAL), 1);  // nobody asked: the protocol is broken
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  EXPECT_TRUE(peer_closed(peer));
}

TEST_F(GroupRuntimeConnectionTest, IdleTimeoutClosesAPooledConnection) {
  group_.keepalive_timeout = config::Millis(2000);
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr);
  int peer = accept_peer();
  pump();
  g.put_idle(c);
  timers_.run(clock_.monotonic_ms + 1999);
  EXPECT_GE(c->fd(), 0);
  timers_.run(clock_.monotonic_ms + 2000);
  event::dispose_pending();
  EXPECT_EQ(g.take_idle(0, user), nullptr);
  EXPECT_TRUE(peer_closed(peer));
}

TEST_F(GroupRuntimeConnectionTest, TakenConnectionHasNoIdleTimeout) {
  group_.keepalive_timeout = config::Millis(2000);
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr);
  int peer = accept_peer();
  pump();
  g.put_idle(c);
  ASSERT_EQ(g.take_idle(0, user), c);
  timers_.run(clock_.monotonic_ms + 1'000'000);
  event::dispose_pending();
  EXPECT_FALSE(peer_closed(peer));
  EXPECT_TRUE(fd_open(c->fd()));
  g.close(c);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, KeepaliveRequestsCountsEveryPut) {
  group_.keepalive_requests = 2;
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr);
  int peer = accept_peer();
  pump();
  g.put_idle(c);  // first request done
  EXPECT_GE(c->fd(), 0);
  ASSERT_EQ(g.take_idle(0, user), c);
  EXPECT_EQ(c->uses(), 1u);
  g.put_idle(c);  // second: worn out
  event::dispose_pending();
  EXPECT_EQ(g.take_idle(0, user), nullptr);
  EXPECT_TRUE(peer_closed(peer));
}

// max_conns 4 for a FastCGI group without `keepalive`: after four requests at once, three
// connections stay pooled and the fourth is closed, freeing its php-fpm child.
TEST_F(GroupRuntimeConnectionTest, FastcgiPoolKeepsOneChildFree) {
  group_.keepalive_leaves_children = true;
  GroupRuntime& g = make_listening(4);
  RecordingUser user;
  TestWaiter w(1, nullptr);
  size_t s;
  UpstreamConnection* c[4];
  int peer[4];
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(acquire(w, &s), Acquire::kReady);
    c[i] = g.open(0, user);
    ASSERT_NE(c[i], nullptr);
    peer[i] = accept_peer();
  }
  pump();
  for (int i = 0; i < 4; ++i) {
    g.put_idle(c[i]);
    g.release(0);
  }
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(peer[3]));  // the last one back finds the pool full
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(peer_closed(peer[i])) << i;
  for (int i = 2; i >= 0; --i) EXPECT_EQ(g.take_idle(0, user), c[i]);  // most recent first
  for (int i = 0; i < 3; ++i) g.close(c[i]);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, PutIdleRespectsTheCap) {
  GroupRuntime& g = make_listening(2);
  RecordingUser user;
  TestWaiter w(1, nullptr);
  size_t s;
  ASSERT_EQ(acquire(w, &s), Acquire::kReady);
  ASSERT_EQ(acquire(w, &s), Acquire::kReady);
  UpstreamConnection* a = g.open(0, user);
  UpstreamConnection* b = g.open(0, user);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  g.put_idle(a);
  g.release(0);
  ASSERT_EQ(acquire(w, &s), Acquire::kReady);  // in use 2, idle 1: one too many once done
  g.put_idle(b);
  g.release(0);
  EXPECT_LT(b->fd(), 0);  // closed (freed after the batch): a alone stays pooled
  EXPECT_EQ(g.take_idle(0, user), a);
  EXPECT_EQ(g.take_idle(0, user), nullptr);
  g.close(a);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, EventForAConnectionClosedEarlierInTheBatchIsIgnored) {
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr);
  int peer = accept_peer();
  pump();
  user = RecordingUser();
  ASSERT_EQ(::send(peer, "x", 1, MSG_NOSIGNAL), 1);
  event::ReadyEvent events[8];
  ASSERT_EQ(poller_->wait(0, events, 8), 1);
  g.close(c);
  g.close(c);                                       // twice in one batch: harmless
  events[0].target->on_ready(events[0].readiness);  // c is still allocated until the batch ends
  event::dispose_pending();
  EXPECT_EQ(user.events, 0);
  EXPECT_TRUE(peer_closed(peer));
}

TEST_F(GroupRuntimeConnectionTest, OpenFailsWithErrnoWhenNothingListens) {
  group_.servers = {unix_server(temp_dir() + "/absent.sock")};
  GroupRuntime& g = make(1);
  RecordingUser user;
  errno = 0;
  EXPECT_EQ(g.open(0, user), nullptr);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(GroupRuntimeConnectionTest, DestructionClosesPooledConnections) {
  GroupRuntime& g = make_listening();
  RecordingUser user;
  UpstreamConnection* c = g.open(0, user);
  ASSERT_NE(c, nullptr);
  int peer = accept_peer();
  pump();
  g.put_idle(c);
  runtime_.reset();
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(peer));
}

// ---------------------------------------------------------------------------------------------
// The pool's order and limits, on real connections (open() to listening unix sockets).

TEST_F(GroupRuntimeConnectionTest, IdleConnectionsAreTakenMostRecentFirst) {
  group_.keepalive = 8;
  GroupRuntime& g = make_listening_servers(2);
  int pa, pb, pc;
  UpstreamConnection* a = connect(g, 0, &pa);
  UpstreamConnection* b = connect(g, 0, &pb);
  UpstreamConnection* c = connect(g, 0, &pc);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  g.put_idle(a);
  g.put_idle(b);
  g.put_idle(c);
  EXPECT_EQ(g.take_idle(1, user_), nullptr);  // pools are per server

  EXPECT_EQ(g.take_idle(0, user_), c);
  EXPECT_EQ(g.take_idle(0, user_), b);
  g.put_idle(c);  // back on top
  EXPECT_EQ(g.take_idle(0, user_), c);
  EXPECT_EQ(c->uses(), 2u);
  EXPECT_EQ(g.take_idle(0, user_), a);
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  // Taken connections are the caller's: still open.
  for (int peer : {pa, pb, pc}) EXPECT_FALSE(peer_closed(peer));
  for (UpstreamConnection* x : {a, b, c}) g.close(x);
  event::dispose_pending();
  for (int peer : {pa, pb, pc}) EXPECT_TRUE(peer_closed(peer));
}

TEST_F(GroupRuntimeConnectionTest, KeepaliveLimitClosesConnectionsBeyondIt) {
  group_.keepalive = 2;
  GroupRuntime& g = make_listening();
  int pa, pb, pc;
  UpstreamConnection* a = connect(g, 0, &pa);
  UpstreamConnection* b = connect(g, 0, &pb);
  UpstreamConnection* c = connect(g, 0, &pc);
  ASSERT_TRUE(a && b && c);
  g.put_idle(a);
  g.put_idle(b);
  g.put_idle(c);
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(pc));
  EXPECT_FALSE(peer_closed(pa));
  EXPECT_FALSE(peer_closed(pb));
  expect_pool_and_close(g, 0, {b, a});
}

TEST_F(GroupRuntimeConnectionTest, KeepaliveZeroPoolsNothing) {
  group_.keepalive = 0;
  GroupRuntime& g = make_listening();
  int pa;
  UpstreamConnection* a = connect(g, 0, &pa);
  ASSERT_NE(a, nullptr);
  g.put_idle(a);
  event::dispose_pending();
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  EXPECT_TRUE(peer_closed(pa));
}

// put_idle() comes before release(), as in the exchanges: a connection is pooled only when the
// idle connections and the slots in use stay within the cap once its slot is given back.
TEST_F(GroupRuntimeConnectionTest, IdlePlusInUseStaysWithinTheCap) {
  group_.keepalive = 8;
  GroupRuntime& g = make_listening(2);
  ASSERT_EQ(g.cap(0), 2u);
  TestWaiter w(1, nullptr);
  size_t sa, sb, sc;
  int pa, pb, pc;
  ASSERT_EQ(acquire(w, &sa), Acquire::kReady);
  ASSERT_EQ(acquire(w, &sb), Acquire::kReady);
  UpstreamConnection* a = connect(g, 0, &pa);
  UpstreamConnection* b = connect(g, 0, &pb);
  ASSERT_TRUE(a && b);

  g.put_idle(a);  // a done
  g.release(sa);
  EXPECT_GE(a->fd(), 0);
  EXPECT_EQ(in_use(g, 0), 1u);

  // A request that opens its own connection while one is idle (say the pooled one was stale
  // and a fresh one is being tried) must not push the pool beyond the cap when it finishes.
  ASSERT_EQ(acquire(w, &sc), Acquire::kReady);
  UpstreamConnection* c = connect(g, 0, &pc);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(in_use(g, 0), 2u);
  g.put_idle(c);
  g.release(sc);
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(pc));

  g.put_idle(b);  // b done: 1 idle + 1 in use (b's, about to go) -> 2 idle
  g.release(sb);
  EXPECT_EQ(in_use(g, 0), 0u);
  EXPECT_FALSE(peer_closed(pa));
  EXPECT_FALSE(peer_closed(pb));
  expect_pool_and_close(g, 0, {b, a});
}

// The exchanges' protocol played many times over: acquire (or queue), take an idle connection or
// open one, finish with put_idle + release (or close + release). Connections held by requests
// plus pooled ones never exceed the cap.
TEST_F(GroupRuntimeConnectionTest, PoolAndSlotsNeverExceedTheCapUnderChurn) {
  group_.keepalive = 8;
  group_.keepalive_requests = 5;
  GroupRuntime& g = make_listening(3);
  ASSERT_EQ(g.cap(0), 3u);

  struct Request {
    std::unique_ptr<TestWaiter> waiter;
    UpstreamConnection* conn = nullptr;
  };
  std::vector<Request> requests(8);
  size_t live = 0;    // connections held by requests
  size_t pooled = 0;  // connections put back and still open
  auto start_on = [&](Request& r, size_t server) {
    r.conn = g.take_idle(server, user_);
    if (r.conn) {
      --pooled;
    } else {
      int peer;
      r.conn = connect(g, server, &peer);
    }
    ++live;
  };
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int step = 0; step < 2000; ++step) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    Request& r = requests[x % requests.size()];
    if (!r.waiter) {
      r.waiter = std::make_unique<TestWaiter>(static_cast<int>(x % 100), nullptr);
      r.waiter->reacquire = false;
    }
    if (r.conn) {
      --live;
      if ((x >> 20) % 4 == 0) {
        g.close(r.conn);
      } else {
        g.put_idle(r.conn);
        if (r.conn->fd() >= 0) ++pooled;  // else closed by the limits
      }
      r.conn = nullptr;
      g.release(0);
    } else if (!r.waiter->queued_in) {
      size_t server;
      if (acquire(*r.waiter, &server) == Acquire::kReady) start_on(r, server);
    }
    // Woken waiters (reacquire is off) try again here, as an exchange would from the callback.
    for (Request& q : requests)
      if (q.waiter && q.waiter->ready > 0 && !q.conn && !q.waiter->queued_in) {
        q.waiter->ready = 0;
        size_t server;
        if (acquire(*q.waiter, &server) == Acquire::kReady) start_on(q, server);
      }
    event::dispose_pending();
    ASSERT_EQ(live, in_use(g, 0)) << "step " << step;
    ASSERT_LE(pooled + live, g.cap(0)) << "step " << step;
  }
  for (Request& r : requests) {
    if (r.waiter) g.cancel(*r.waiter);
    if (r.conn) g.close(r.conn);
  }
  size_t taken = 0;
  while (UpstreamConnection* c = g.take_idle(0, user_)) {
    g.close(c);
    ++taken;
  }
  EXPECT_EQ(taken, pooled);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, OnlyTheConnectionClosedByThePeerLeavesThePool) {
  GroupRuntime& g = make_listening();
  int pa, pb;
  UpstreamConnection* a = connect(g, 0, &pa);
  UpstreamConnection* b = connect(g, 0, &pb);
  ASSERT_TRUE(a && b);
  pump();  // the connects' writability edges
  g.put_idle(a);
  g.put_idle(b);
  EXPECT_EQ(pump(), 0);
  close_peer(pa);
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(g.take_idle(0, user_), b);  // the survivor
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  g.close(b);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, IdleConnectionThatSendsDataLeavesThePool) {
  GroupRuntime& g = make_listening();
  int pa;
  UpstreamConnection* a = connect(g, 0, &pa);
  ASSERT_NE(a, nullptr);
  pump();
  g.put_idle(a);
  ASSERT_EQ(::send(pa, "x", 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(pump(), 1);
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  EXPECT_TRUE(peer_closed(pa));
}

// The peer closes, the event is already in the batch, and a request takes the connection before
// the event is handled: the event goes to the request, and the pool keeps the other one.
TEST_F(GroupRuntimeConnectionTest, EventForAConnectionTakenInTheSameBatchGoesToItsUser) {
  GroupRuntime& g = make_listening();
  int pa, pb;
  UpstreamConnection* b = connect(g, 0, &pb);
  UpstreamConnection* a = connect(g, 0, &pa);
  ASSERT_TRUE(a && b);
  pump();
  g.put_idle(b);
  g.put_idle(a);
  close_peer(pa);
  event::ReadyEvent events[8];
  ASSERT_EQ(poller_->wait(0, events, 8), 1);
  RecordingUser request;
  ASSERT_EQ(g.take_idle(0, request), a);
  events[0].target->on_ready(events[0].readiness);
  event::dispose_pending();
  EXPECT_GE(a->fd(), 0);  // not closed by the pool: the request's to handle
  EXPECT_EQ(request.events, 1);
  EXPECT_EQ(g.take_idle(0, user_), b);
  g.close(a);
  g.close(b);
  event::dispose_pending();
}

TEST_F(GroupRuntimeConnectionTest, EachPooledConnectionHasItsOwnIdleTimeout) {
  group_.keepalive_timeout = config::Millis(1000);
  GroupRuntime& g = make_listening();
  int pa, pb;
  UpstreamConnection* a = connect(g, 0, &pa);
  UpstreamConnection* b = connect(g, 0, &pb);
  ASSERT_TRUE(a && b);
  pump();
  const int64_t t0 = clock_.monotonic_ms;
  g.put_idle(a);
  clock_.monotonic_ms = t0 + 400;
  g.put_idle(b);
  EXPECT_EQ(timers_.next_in(t0), 1000);

  timers_.run(t0 + 999);
  EXPECT_FALSE(peer_closed(pa));
  timers_.run(t0 + 1000);
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(pa));
  EXPECT_FALSE(peer_closed(pb));
  timers_.run(t0 + 1400);
  event::dispose_pending();
  EXPECT_TRUE(peer_closed(pb));
  EXPECT_EQ(g.take_idle(0, user_), nullptr);
  EXPECT_EQ(pump(), 0);  // nothing left registered
}

// ---------------------------------------------------------------------------------------------
// connect_to().

TEST_F(GroupRuntimeTest, ConnectToAListeningUnixSocket) {
  std::string path;
  int listener = listen_unix("fpm.sock", 16, &path);
  int fd = connect_to(unix_server(path));
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_TRUE(::fcntl(fd, F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(accepted, 0);
  ASSERT_EQ(::send(fd, "ping", 4, MSG_NOSIGNAL), 4);
  char buf[8];
  EXPECT_EQ(::recv(accepted, buf, sizeof buf, 0), 4);
  ::close(accepted);
  ::close(fd);
}

TEST_F(GroupRuntimeTest, ConnectToAMissingUnixSocketFails) {
  std::string path = temp_dir() + "/nobody-here.sock";
  errno = 0;
  EXPECT_EQ(connect_to(unix_server(path)), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(GroupRuntimeTest, ConnectToABoundButNotListeningUnixSocketIsRefused) {
  std::string path;
  listen_unix("bound.sock", -1, &path);
  errno = 0;
  EXPECT_EQ(connect_to(unix_server(path)), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
}

TEST_F(GroupRuntimeTest, ConnectToAUnixSocketWithAFullBacklogSaysEagain) {
  std::string path;
  listen_unix("busy.sock", 0, &path);
  std::vector<int> connected;
  int fd = -1;
  int saved = 0;
  for (int i = 0; i < 16; ++i) {
    errno = 0;
    fd = connect_to(unix_server(path));
    saved = errno;
    if (fd < 0) break;
    connected.push_back(fd);
  }
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(saved, EAGAIN);
  for (int c : connected) ::close(c);
}

TEST_F(GroupRuntimeTest, ConnectToTcpListenerSetsNoDelay) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  fds_.push_back(listener);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof sin;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&sin), &len), 0);

  int fd = connect_to(tcp_server(ntohs(sin.sin_port)));
  ASSERT_GE(fd, 0) << std::strerror(errno);
  pollfd p{fd, POLLOUT, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  int err = -1;
  len = sizeof err;
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
  int nodelay = 0;
  len = sizeof nodelay;
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
  ::close(fd);
}

TEST_F(GroupRuntimeTest, ConnectToAClosedTcpPortFails) {
  // A port that was just free: bind an ephemeral one, note it, close it.
  int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(probe, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  socklen_t len = sizeof sin;
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&sin), &len), 0);
  ::close(probe);

  errno = 0;
  int fd = connect_to(tcp_server(ntohs(sin.sin_port)));
  if (fd < 0) {
    EXPECT_EQ(errno, ECONNREFUSED);
    return;
  }
  // In progress: the refusal arrives asynchronously.
  pollfd p{fd, POLLOUT, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  int err = 0;
  len = sizeof err;
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, ECONNREFUSED);
  ::close(fd);
}

}  // namespace
}  // namespace peregrine::upstream
