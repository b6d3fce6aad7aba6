// Readiness notification behind a small interface. epoll is the first backend; an io_uring
// backend (IORING_OP_POLL_ADD, multishot) can implement the same four calls.
#pragma once

#include <cstdint>
#include <memory>

namespace peregrine::event {

enum Interest : uint32_t {
  kReadable = 1u << 0,
  kWritable = 1u << 1,
  kEdgeTriggered = 1u << 2,  // report a change of readiness once, not while it lasts
  // Of the pollers watching this one descriptor, wake one rather than all (a listening socket
  // every worker shares). Only when the descriptor is added; never modified afterwards.
  kExclusive = 1u << 3,
};

enum Readiness : uint32_t {
  kIn = 1u << 0,
  kOut = 1u << 1,
  kHangup = 1u << 2,  // peer closed or error: a read will tell which
};

// Anything registered with a poller. The poller hands back the pointer it was given.
class Pollable {
 public:
  virtual void on_ready(uint32_t readiness) = 0;

 protected:
  ~Pollable() = default;
};

struct ReadyEvent {
  Pollable* target;
  uint32_t readiness;
};

class Poller {
 public:
  virtual ~Poller() = default;
  virtual bool add(int fd, uint32_t interest, Pollable* target) = 0;
  virtual bool modify(int fd, uint32_t interest, Pollable* target) = 0;
  virtual void remove(int fd) = 0;
  // Waits up to timeout_ms (-1: forever) and fills at most `capacity` events; returns the count,
  // 0 on timeout or interruption.
  virtual int wait(int timeout_ms, ReadyEvent* events, int capacity) = 0;
};

std::unique_ptr<Poller> make_epoll_poller();

}  // namespace peregrine::event
