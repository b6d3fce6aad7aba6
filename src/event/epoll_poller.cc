#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

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
  EpollPoller() : fd_(epoll_create1(EPOLL_CLOEXEC)) {
    if (fd_ < 0) std::abort();  // no descriptors left at start-up: nothing sensible to do
  }
  ~EpollPoller() override { ::close(fd_); }

  bool add(int fd, uint32_t interest, Pollable* target) override {
    epoll_event ev{to_epoll(interest), {.ptr = target}};
    return epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  }
  bool modify(int fd, uint32_t interest, Pollable* target) override {
    epoll_event ev{to_epoll(interest), {.ptr = target}};
    return epoll_ctl(fd_, EPOLL_CTL_MOD, fd, &ev) == 0;
  }
  void remove(int fd) override { epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr); }
  void close(int fd) override { ::close(fd); }  // also leaves the epoll set

  int wait(int timeout_ms, ReadyEvent* events, int capacity) override {
    if (capacity > kBatch) capacity = kBatch;
    int n = epoll_wait(fd_, raw_, capacity, timeout_ms);
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
  static constexpr int kBatch = 512;
  int fd_;
  epoll_event raw_[kBatch];
};

}  // namespace

std::unique_ptr<Poller> make_epoll_poller() {
  return std::make_unique<EpollPoller>();
}

}  // namespace peregrine::event
