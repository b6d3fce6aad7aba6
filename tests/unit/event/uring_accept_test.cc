// Accepting through the io_uring poller (event::kAccept): a multishot accept per listening
// socket, whose connections come with the events. What a listener relies on: every connection
// once, as a descriptor it now owns; a failure (out of descriptors) reported and accepting
// taken up again; and a removal that leaves the backlog's connections to whoever else accepts
// from the socket (another worker, the new process of an upgrade).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "event/poller.h"
#include "loopback_listener.h"

namespace peregrine::event {
namespace {

struct Acceptor : Pollable {
  void on_ready(uint32_t readiness) override { ready |= readiness; }
  void on_accepted(int fd, int error) override {
    if (fd >= 0) {
      accepted.push_back(fd);
    } else {
      errors.push_back(error);
    }
  }
  uint32_t ready = 0;
  std::vector<int> accepted;
  std::vector<int> errors;
};

class UringAcceptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendChoice choice = choose_backend(Backend::kIoUring);
    if (!choice.ok) GTEST_SKIP() << "io_uring unavailable: " << choice.reason;
    std::string error;
    poller = make_uring_poller(&error);
    ASSERT_TRUE(poller) << error;
    ASSERT_TRUE(poller->accepts());
    listener = test_support::listen_on_loopback(&address);
    ASSERT_GE(listener, 0) << std::strerror(errno);
  }
  void TearDown() override {
    poller.reset();
    for (int fd : target.accepted) ::close(fd);
    for (int fd : clients) ::close(fd);
    if (listener >= 0) ::close(listener);
  }

  int pump(int timeout_ms = 100) {
    ReadyEvent events[64];
    int n = poller->wait(timeout_ms, events, 64);
    for (int i = 0; i < n; ++i) events[i].dispatch();
    return n;
  }
  // A client connected (the handshake is the kernel's: done before any accept).
  int connect_client() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
        << std::strerror(errno);
    clients.push_back(fd);
    return fd;
  }
  // The local port of a client, which the server sees as its peer's.
  static uint16_t port_of(int fd, bool peer) {
    sockaddr_in a{};
    socklen_t length = sizeof a;
    if (peer) {
      getpeername(fd, reinterpret_cast<sockaddr*>(&a), &length);
    } else {
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
    }
    return ntohs(a.sin_port);
  }

  std::unique_ptr<Poller> poller;
  int listener = -1;
  sockaddr_in address{};
  std::vector<int> clients;
  Acceptor target;
};

// A worker that stops in the middle of a batch drops the rest: an accepted connection's
// descriptor is closed, not leaked (an embedding application goes on after the server stops).
TEST(ReadyEventDrop, ClosesTheAcceptedDescriptorAndNothingElse) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ReadyEvent{nullptr, kAccepted, static_cast<uint32_t>(pair[0])}.drop();
  char byte;
  EXPECT_EQ(::recv(pair[1], &byte, 1, 0), 0);  // the peer sees the end
  ReadyEvent{nullptr, kAccepted | kHangup, static_cast<uint32_t>(pair[1])}.drop();  // an errno
  ReadyEvent{nullptr, kIn, static_cast<uint32_t>(pair[1])}.drop();
  EXPECT_EQ(::send(pair[1], "x", 1, MSG_NOSIGNAL), -1);  // still open: EPIPE, not EBADF
  EXPECT_EQ(errno, EPIPE);
  ::close(pair[1]);
}

TEST(AcceptSupport, EpollDoesNotAccept) {
  EXPECT_FALSE(make_epoll_poller()->accepts());
}

TEST_F(UringAcceptTest, EachConnectionComesOnceAsADescriptor) {
  ASSERT_TRUE(poller->add(listener, kAccept, &target));
  pump(20);
  for (int i = 0; i < 5; ++i) connect_client();
  for (int round = 0; round < 10 && target.accepted.size() < 5; ++round) pump();
  ASSERT_EQ(target.accepted.size(), 5u);
  EXPECT_EQ(target.ready, 0u);  // no readiness reports: the connections themselves
  for (size_t i = 0; i < 5; ++i) {
    // In order, each the server's end of one client, non-blocking.
    EXPECT_EQ(port_of(target.accepted[i], true), port_of(clients[i], false));
    char c;
    EXPECT_EQ(::recv(target.accepted[i], &c, 1, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
  }
  // More keep coming: the accept goes on after each.
  connect_client();
  for (int round = 0; round < 10 && target.accepted.size() < 6; ++round) pump();
  EXPECT_EQ(target.accepted.size(), 6u);
  EXPECT_EQ(pump(20), 0);
}

// A listener being closed (a graceful stop, an upgrade) leaves what is still in the backlog to
// the other processes and workers accepting from the same socket.
TEST_F(UringAcceptTest, RemovalLeavesTheBacklogToOthers) {
  ASSERT_TRUE(poller->add(listener, kAccept, &target));
  pump(20);
  poller->remove(listener);
  int client = connect_client();
  pump(20);
  pump(20);
  EXPECT_TRUE(target.accepted.empty());
  int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(fd, 0) << "the ring took the connection: " << std::strerror(errno);
  EXPECT_EQ(port_of(fd, true), port_of(client, false));
  ::close(fd);
}

// A graceful stop closes the listeners and may never wait again: the socket must be closed by
// then (new connections refused), not held open by the cancelled accept's unrun completion.
TEST_F(UringAcceptTest, CloseRefusesNewConnectionsAtOnce) {
  ASSERT_TRUE(poller->add(listener, kAccept, &target));
  pump(20);
  poller->close(listener);
  listener = -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
  ::close(fd);
}

// Added and removed within one batch: the accept is never left running on the number.
TEST_F(UringAcceptTest, RemovedBeforeItsFirstWaitTakesNothing) {
  ASSERT_TRUE(poller->add(listener, kAccept, &target));
  poller->remove(listener);
  connect_client();
  pump(20);
  pump(20);
  EXPECT_TRUE(target.accepted.empty());
  int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd >= 0) ::close(fd);
}

// Out of descriptors: the listener hears why, and the connection comes once some are free.
TEST_F(UringAcceptTest, AFailureIsReportedAndAcceptingGoesOn) {
  connect_client();
  // The kernel reads the limit when the accept is submitted: tighten it before.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // No descriptor free: the lowest free number is at least the highest in use + 1.
  int probe = dup(0);
  ASSERT_GE(probe, 0);
  ::close(probe);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(probe);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  const bool added = poller->add(listener, kAccept, &target);
  pump(50);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(added);
  ASSERT_FALSE(target.errors.empty());
  EXPECT_EQ(target.errors[0], EMFILE);
  EXPECT_TRUE(target.accepted.empty());
  for (int round = 0; round < 10 && target.accepted.empty(); ++round) pump();
  EXPECT_EQ(target.accepted.size(), 1u);
}

}  // namespace
}  // namespace peregrine::event
