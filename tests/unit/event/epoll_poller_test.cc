#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "event/poller.h"

namespace peregrine::event {
namespace {

struct Nothing : Pollable {
  void on_ready(uint32_t) override {}
};

// A listening unix socket shared by several pollers, as every worker shares a unix listener.
int listen_unix(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  unlink(path.c_str());
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(listen(fd, 16), 0);
  return fd;
}

// Pollers blocked in wait() on one shared listening socket: a connection wakes how many?
int woken_by_one_connection(uint32_t interest, bool io_uring = false) {
  const std::string path = "/tmp/peregrine-poller-test-" + std::to_string(getpid());
  const int listener = listen_unix(path);
  constexpr int kPollers = 3;
  Nothing target;
  std::vector<std::unique_ptr<Poller>> pollers;
  for (int i = 0; i < kPollers; ++i) {
    std::string error;
    pollers.push_back(io_uring ? make_uring_poller(&error) : make_epoll_poller());
    if (!pollers.back()) return -1;
    EXPECT_TRUE(pollers.back()->add(listener, interest, &target));
  }
  std::atomic<int> woken{0};
  std::vector<std::thread> threads;
  for (auto& poller : pollers) {
    threads.emplace_back([&woken, p = poller.get()] {
      ReadyEvent events[4];
      if (p->wait(1000, events, 4) > 0) woken.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all of them inside wait()
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  for (auto& t : threads) t.join();
  close(client);
  close(listener);
  unlink(path.c_str());
  return woken.load();
}

TEST(EpollPoller, ExclusiveListenerWakesOneWaiter) {
  EXPECT_EQ(woken_by_one_connection(kReadable | kExclusive), 1);
}

TEST(EpollPoller, SharedListenerWithoutExclusiveWakesEveryWaiter) {
  EXPECT_EQ(woken_by_one_connection(kReadable), 3);
}

// The io_uring poller passes EPOLLEXCLUSIVE to its polls: the same wake-one.
TEST(UringPoller, ExclusiveListenerWakesOneWaiter) {
  if (!choose_backend(Backend::kIoUring).ok) GTEST_SKIP() << "io_uring unavailable";
  EXPECT_EQ(woken_by_one_connection(kReadable | kExclusive, true), 1);
}

TEST(UringPoller, SharedListenerWithoutExclusiveWakesEveryWaiter) {
  if (!choose_backend(Backend::kIoUring).ok) GTEST_SKIP() << "io_uring unavailable";
  EXPECT_EQ(woken_by_one_connection(kReadable, true), 3);
}

}  // namespace
}  // namespace peregrine::event
