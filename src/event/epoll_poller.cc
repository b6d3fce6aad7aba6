#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "event/poller.h"

namespace peregrine::event {
namespace {

uint32_t to_epoll(uint32_t interest) {
  // EPOLLRDHUP tells a connection its peer closed; epoll refuses it beside EPOLLEXCLUSIVE, and
  // a listening socket has no peer anyway.
  uint32_t events = (interest & kExclusive) ? EPOLLEXCLUSIVE : EPOLLRDHUP;
  if (interest & kReadable) events |= EPOLLIN;
  if (interest & kWritable) events |= EPOLLOUT;
  if (interest & kEdgeTriggered) events |= EPOLLET;
  return events;
}

class EpollPoller final : public Poller {
 public:
  explicit EpollPoller(unsigned batch_wait_us)
      : fd_(epoll_create1(EPOLL_CLOEXEC)), batch_wait_us_(batch_wait_us) {
    if (fd_ < 0) std::abort();  // no descriptors left at start-up: nothing sensible to do
  }
  ~EpollPoller() override { ::close(fd_); }

  bool add(int fd, uint32_t interest, Pollable* target) override {
    epoll_event ev{to_epoll(interest), {.ptr = target}};
    if (epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
    if (static_cast<size_t>(fd) >= is_registered_.size()) is_registered_.resize(fd + 64);
    if (!is_registered_[fd]) {
      is_registered_[fd] = true;
      ++registered_;
    }
    return true;
  }
  bool modify(int fd, uint32_t interest, Pollable* target) override {
    epoll_event ev{to_epoll(interest), {.ptr = target}};
    return epoll_ctl(fd_, EPOLL_CTL_MOD, fd, &ev) == 0;
  }
  void remove(int fd) override {
    forget(fd);
    epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr);
  }
  void close(int fd) override {
    forget(fd);
    ::close(fd);  // also leaves the epoll set
  }

  int wait(int timeout_ms, ReadyEvent* events, int capacity) override {
    if (capacity > kBatch) capacity = kBatch;
    // The batch wait: epoll_wait returns at the first ready descriptor, so to wake once for
    // several events the worker sleeps first. It sleeps even when some are ready already, as
    // io_uring's wait does: asking first and going on at once with the one or two there (a
    // back end's answer, a client's next request) cost the proxy 7 % more CPU per request and
    // doubled PHP's p99 (docs/architecture.md, "Waiting in batches").
    bool held = false;
    if (batch_wait_us_ > 0 && timeout_ms != 0 && rule_.hold(registered_)) {
      const timespec hold{batch_wait_us_ / 1000000, (batch_wait_us_ % 1000000) * 1000L};
      nanosleep(&hold, nullptr);
      held = true;
    }
    const int n = epoll_wait(fd_, raw_, capacity, timeout_ms);
    rule_.reported(n > 0 ? static_cast<unsigned>(n) : 0, held);
    if (n < 0) return 0;  // EINTR
    for (int i = 0; i < n; ++i) {
      uint32_t e = raw_[i].events;
      uint32_t r = 0;
      if (e & EPOLLIN) r |= kIn;
      if (e & EPOLLOUT) r |= kOut;
      if (e & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) r |= kHangup;
      events[i] = {static_cast<Pollable*>(raw_[i].data.ptr), r};
    }
    return n;
  }

 private:
  void forget(int fd) {
    if (fd < 0 || static_cast<size_t>(fd) >= is_registered_.size() || !is_registered_[fd]) return;
    is_registered_[fd] = false;
    --registered_;
  }

  static constexpr int kBatch = 512;
  int fd_;
  unsigned batch_wait_us_;  // 0: never hold
  BatchWaitRule rule_;
  unsigned registered_ = 0;          // descriptors added and not yet removed or closed
  std::vector<bool> is_registered_;  // by descriptor
  epoll_event raw_[kBatch];
};

}  // namespace

std::unique_ptr<Poller> make_epoll_poller(unsigned batch_wait_us) {
  return std::make_unique<EpollPoller>(batch_wait_us);
}

}  // namespace peregrine::event
