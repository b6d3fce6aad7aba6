// Readiness notification behind a small interface, with two backends: epoll, and io_uring
// (IORING_OP_POLL_ADD: multishot polls, one submission per wait; and, for the sockets that ask,
// multishot receives into a provided buffer ring, sends, and multishot accepts). See
// docs/io_uring.md.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "event/batch_wait.h"

namespace peregrine::event {

enum Interest : uint32_t {
  kReadable = 1u << 0,
  kWritable = 1u << 1,
  kEdgeTriggered = 1u << 2,  // report a change of readiness once, not while it lasts
  // Of the pollers watching this one descriptor, wake one rather than all (a listening socket
  // every worker shares). Only when the descriptor is added; never modified afterwards.
  kExclusive = 1u << 3,
  // Hand over the bytes as they arrive (Pollable::on_received) instead of reporting that they
  // can be read: no recv(2) per wake-up. Only where Poller::receives(); with kEdgeTriggered;
  // fixed when the descriptor is added. Writability and hang-ups are still reported.
  kReceive = 1u << 4,
  // A listening socket: hand over each accepted connection (Pollable::on_accepted) instead of
  // reporting that one can be accepted: no accept4(2) per connection. Only where
  // Poller::accepts(); instead of kReadable; fixed when the descriptor is added.
  kAccept = 1u << 5,
};

enum Readiness : uint32_t {
  kIn = 1u << 0,
  kOut = 1u << 1,
  kHangup = 1u << 2,    // peer closed or error: a read will tell which
  kReceived = 1u << 3,  // a kReceive registration's bytes: ReadyEvent::bytes and length
  kSent = 1u << 4,      // a Poller::send finished: every byte went out, or (with kHangup) not
  kAccepted = 1u << 5,  // a kAccept registration's connection: its descriptor in ReadyEvent::length
};

// Anything registered with a poller. The poller hands back the pointer it was given.
class Pollable {
 public:
  virtual void on_ready(uint32_t readiness) = 0;
  // A kReceive registration's bytes, valid until the next Poller::wait (the buffer then goes
  // back to the kernel); length 0: the stream ended (end of file, or an error), nothing follows.
  virtual void on_received(const char* /*bytes*/, size_t /*length*/) {}
  // A Poller::send is over: every byte went out (ok), or the socket failed.
  virtual void on_sent(bool /*ok*/) {}
  // A kAccept registration's new connection, non-blocking and close-on-exec, now the target's to
  // close; or, with fd -1, accepting failed with `error` (EMFILE...) and is tried again with the
  // next wait, as a listener that stays readable is reported again.
  virtual void on_accepted(int /*fd*/, int /*error*/) {}

 protected:
  ~Pollable() = default;
};

struct ReadyEvent {
  Pollable* target;
  uint32_t readiness;
  uint32_t length = 0;  // kReceived; kAccepted: the descriptor, or with kHangup the errno
  const char* bytes = nullptr;

  void dispatch() const {
    if (readiness & kReceived) {
      target->on_received(bytes, length);
    } else if (readiness & kAccepted) {
      const int value = static_cast<int>(length);
      if (readiness & kHangup) {
        target->on_accepted(-1, value);
      } else {
        target->on_accepted(value, 0);
      }
    } else if (readiness & kSent) {
      target->on_sent(!(readiness & kHangup));
    } else {
      target->on_ready(readiness);
    }
  }
  // Instead of dispatch(), when the loop ends before this event's turn: releases what it
  // carries, an accepted connection's descriptor.
  void drop() const {
    if ((readiness & kAccepted) && !(readiness & kHangup)) ::close(static_cast<int>(length));
  }
};

class Poller {
 public:
  virtual ~Poller() = default;
  virtual bool add(int fd, uint32_t interest, Pollable* target) = 0;
  virtual bool modify(int fd, uint32_t interest, Pollable* target) = 0;
  virtual void remove(int fd) = 0;
  // Closes a descriptor that may be registered. epoll needs only close(2) (the descriptor leaves
  // the set); an io_uring poll holds a reference to the file, so it is cancelled first, or the
  // socket would stay open (no FIN) until the ring goes.
  virtual void close(int fd) = 0;
  // Waits up to timeout_ms (-1: forever) and fills at most `capacity` events; returns the count,
  // 0 on timeout or interruption.
  virtual int wait(int timeout_ms, ReadyEvent* events, int capacity) = 0;

  // ---- Receiving through the poller (kReceive): io_uring only ----
  virtual bool receives() const { return false; }
  // Back-pressure for a kReceive registration: stop taking bytes from the socket (those already
  // taken still arrive), and start again. Resuming before the stop is complete is fine.
  virtual void pause_receiving(int /*fd*/) {}
  virtual void resume_receiving(int /*fd*/) {}

  // ---- Accepting through the poller (kAccept): io_uring only ----
  virtual bool accepts() const { return false; }

  // ---- Sending through the poller: io_uring only ----
  // Queues a copy of `bytes` to go out on a registered descriptor with the next wait, in the
  // same system call; its end is one kSent event (on_sent). One send at a time per descriptor.
  // A close or removal cancels it (after handing it to the kernel, which resolves the
  // descriptor then: a number reused by the next accept never gets these bytes). False (and
  // nothing queued) for a descriptor not registered, or with a send in flight.
  virtual bool send(int /*fd*/, std::string_view /*bytes*/) { return false; }
};

// `batch_wait_us`: how long a busy worker's wait may hold for more events (batch_wait.h; 0: never).
std::unique_ptr<Poller> make_epoll_poller(unsigned batch_wait_us = kDefaultBatchWaitUs);

// Null when no ring can be made here; then `error` says why (strerror and what causes it).
std::unique_ptr<Poller> make_uring_poller(std::string* error,
                                          unsigned batch_wait_us = kDefaultBatchWaitUs);

enum class Backend { kEpoll, kIoUring, kAuto };

struct BackendChoice {
  Backend backend = Backend::kEpoll;  // kEpoll or kIoUring, never kAuto
  std::string reason;                 // why io_uring cannot be used ("" when it can or is unasked)
  bool ok = true;                     // false: io_uring was asked for explicitly and is unavailable
};

// Probes io_uring once (a small ring made and freed) when `wanted` is kIoUring or kAuto. kAuto
// falls back to epoll where io_uring is unavailable (ENOSYS, EPERM from kernel.io_uring_disabled
// or a seccomp filter, a kernel older than 5.19).
BackendChoice choose_backend(Backend wanted);

// The poller of a chosen backend. A ring that cannot be made although the probe could (memory)
// falls back to epoll with an error-log line.
std::unique_ptr<Poller> make_poller(Backend backend, unsigned batch_wait_us = kDefaultBatchWaitUs);

}  // namespace peregrine::event
