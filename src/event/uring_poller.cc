// The event::Poller interface on io_uring: readiness through IORING_OP_POLL_ADD, every request
// queued during a loop iteration submitted by the next wait() in the same system call that
// waits for completions. See docs/io_uring.md.
//
// Each registration lives in a table indexed by descriptor, with a generation that every add,
// modify and remove advances. A poll's user_data carries (generation, fd): a completion whose
// generation is not the slot's current one belongs to a registration that is gone (removed,
// closed, replaced) and is dropped, so no pointer to a freed target is ever handed back, even
// when the descriptor number was reused meanwhile.
#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "event/poller.h"

namespace peregrine::event {
namespace {

// Every flag here needs Linux 5.19, which also has everything else used (multishot and
// updatable polls, IORING_FEAT_NODROP, timeouts passed to io_uring_enter).
constexpr unsigned kSetupFlags =
    IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
constexpr unsigned kSubmissionEntries = 1024;
// Room for one completion per connection of a busy worker before the kernel's overflow list
// (which it keeps, IORING_FEAT_NODROP, and we drain) is needed.
constexpr unsigned kCompletionEntries = 8192;

// user_data: bit 63 marks our removals, bit 62 our updates (their own completions, not the
// polls'), bits 32..61 the generation, bits 0..31 the descriptor.
constexpr uint64_t kRemoval = uint64_t{1} << 63;
constexpr uint64_t kUpdate = uint64_t{1} << 62;
constexpr uint32_t kGenerationMask = 0x3fffffff;

uint64_t tag(int fd, uint32_t generation) {
  return (uint64_t{generation & kGenerationMask} << 32) | static_cast<uint32_t>(fd);
}
int fd_of(uint64_t user_data) {
  return static_cast<int>(static_cast<uint32_t>(user_data));
}
uint32_t generation_of(uint64_t user_data) {
  return static_cast<uint32_t>(user_data >> 32) & kGenerationMask;
}

unsigned poll_mask(uint32_t interest) {
  // As with epoll: RDHUP tells a connection its peer closed; a listener has none, and the
  // exclusive wake-up is what a shared listener needs.
  unsigned mask = (interest & kExclusive) ? unsigned{EPOLLEXCLUSIVE} : unsigned{POLLRDHUP};
  if (interest & kReadable) mask |= POLLIN;
  if (interest & kWritable) mask |= POLLOUT;
  return mask;
}

std::string setup_error(int error) {
  std::string text = std::string("io_uring_setup: ") + std::strerror(error);
  switch (error) {
    case ENOSYS:
      return text + " (a kernel built without io_uring)";
    case EPERM:
    case EACCES:
      return text + " (kernel.io_uring_disabled, or a seccomp filter such as a container's)";
    case EINVAL:
      return text + " (a kernel older than 5.19)";
    case ENOMEM:
      return text + " (memory for the ring, or RLIMIT_MEMLOCK on older kernels)";
    default:
      return text;
  }
}

bool make_ring(io_uring* ring, unsigned entries, std::string* error) {
  io_uring_params params{};
  params.flags = kSetupFlags;
  params.cq_entries = entries * (kCompletionEntries / kSubmissionEntries);
  int rc = io_uring_queue_init_params(entries, ring, &params);
  if (rc < 0) {
    if (error) *error = setup_error(-rc);
    return false;
  }
  if (!(params.features & IORING_FEAT_NODROP) || !(params.features & IORING_FEAT_EXT_ARG)) {
    io_uring_queue_exit(ring);
    if (error) *error = "io_uring lacks IORING_FEAT_NODROP or IORING_FEAT_EXT_ARG (kernel < 5.11)";
    return false;
  }
  return true;
}

class UringPoller final : public Poller {
 public:
  // False (and `error` says why) when no ring can be made.
  bool start(unsigned entries, std::string* error) {
    started_ = make_ring(&ring_, entries, error);
    return started_;
  }
  ~UringPoller() override {
    if (started_) io_uring_queue_exit(&ring_);  // cancels every poll
  }

  bool add(int fd, uint32_t interest, Pollable* target) override {
    if (fd < 0) {
      errno = EBADF;
      return false;
    }
    if (static_cast<size_t>(fd) >= slots_.size()) slots_.resize(static_cast<size_t>(fd) + 1);
    Slot& slot = slots_[static_cast<size_t>(fd)];
    // Still registered: the descriptor was closed behind our back and its number reused. The old
    // poll watches the old file (and holds it open): cancel it, then watch the new one.
    if (slot.target) queue_remove(tag(fd, slot.generation));
    slot.target = target;
    slot.interest = interest;
    ++slot.generation;
    arm(fd, slot);
    return true;
  }

  bool modify(int fd, uint32_t interest, Pollable* target) override {
    Slot* slot = find(fd);
    if (!slot) {
      errno = ENOENT;
      return false;
    }
    const uint64_t old_tag = tag(fd, slot->generation);
    const bool was_edge = slot->interest & kEdgeTriggered;
    slot->target = target;
    slot->interest = interest;
    ++slot->generation;
    if (!was_edge || !(interest & kEdgeTriggered)) {
      // A one-shot (level-triggered) poll cannot become multishot by an update.
      queue_remove(old_tag);
      arm(fd, *slot);
      return true;
    }
    // The kernel re-arms the poll with the new mask and tag, and reports a readiness that is
    // already there, as EPOLL_CTL_MOD does. Should the poll have ended meanwhile, the update's
    // own completion says so (see on_update_failed).
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_update(
        sqe, old_tag, tag(fd, slot->generation), poll_mask(interest),
        IORING_POLL_UPDATE_EVENTS | IORING_POLL_UPDATE_USER_DATA | IORING_POLL_ADD_MULTI);
    io_uring_sqe_set_data64(sqe, kUpdate | old_tag);
    return true;
  }

  void remove(int fd) override {
    Slot* slot = find(fd);
    if (!slot) return;
    queue_remove(tag(fd, slot->generation));
    slot->target = nullptr;
    ++slot->generation;  // a completion already on its way is now stale
  }

  void close(int fd) override {
    remove(fd);
    ::close(fd);
  }

  int wait(int timeout_ms, ReadyEvent* events, int capacity) override {
    io_uring_cqe* cqe = nullptr;
    if (timeout_ms < 0) {
      io_uring_submit_and_wait(&ring_, 1);
    } else {
      __kernel_timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000LL};
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);  // -ETIME, -EINTR: 0 events
    }
    ++batch_;
    int n = 0;
    while (n < capacity) {
      if (io_uring_peek_cqe(&ring_, &cqe) != 0) {
        // The CQ ring filled up and the kernel kept the rest aside: bring them in now that
        // there is room.
        if (!io_uring_cq_has_overflow(&ring_)) break;
        io_uring_get_events(&ring_);
        if (io_uring_peek_cqe(&ring_, &cqe) != 0) break;
      }
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      const bool more = cqe->flags & IORING_CQE_F_MORE;
      io_uring_cqe_seen(&ring_, cqe);
      if (data & kUpdate) {
        on_update_failed(data & ~kUpdate, res);
      } else if (data & kRemoval) {
        // 0, or -ENOENT (the poll had ended): done. -EALREADY: the kernel was reporting for
        // that poll just then, and a multishot poll goes on after it, holding its file (the
        // socket stays open, no FIN): ask again.
        if (res == -EALREADY) queue_remove(data & ~kRemoval);
      } else {
        on_poll(data, res, more, events, &n);
      }
    }
    return n;
  }

 private:
  struct Slot {
    Pollable* target = nullptr;  // null: not registered
    uint32_t interest = 0;
    uint32_t generation = 0;
    uint32_t batch = 0;  // the wait() that last reported it, and where in its events
    int event = -1;
  };

  Slot* find(int fd) {
    if (fd < 0 || static_cast<size_t>(fd) >= slots_.size()) return nullptr;
    Slot& slot = slots_[static_cast<size_t>(fd)];
    return slot.target ? &slot : nullptr;
  }

  // A registration's current poll, for `slot` if the completion carrying `data` is not stale.
  Slot* current(uint64_t data) {
    Slot* slot = find(fd_of(data));
    return slot && (slot->generation & kGenerationMask) == generation_of(data) ? slot : nullptr;
  }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {  // the submission queue is full: hand it to the kernel now
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  // Edge-triggered: one multishot poll, reporting each wake-up of the file as EPOLLET does.
  // Level-triggered (listeners, the mailbox): a one-shot poll, armed again once reported; the
  // kernel checks readiness as it arms it, so what is left (connections beyond one accept
  // batch) is reported again.
  void arm(int fd, const Slot& slot) {
    io_uring_sqe* sqe = next_sqe();
    if (slot.interest & kEdgeTriggered) {
      io_uring_prep_poll_multishot(sqe, fd, poll_mask(slot.interest));
    } else {
      io_uring_prep_poll_add(sqe, fd, poll_mask(slot.interest));
    }
    io_uring_sqe_set_data64(sqe, tag(fd, slot.generation));
  }

  void queue_remove(uint64_t poll_tag) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_remove(sqe, poll_tag);
    io_uring_sqe_set_data64(sqe, kRemoval | poll_tag);
  }

  // A failed update means the poll it named had ended or was completing (-ENOENT, -EALREADY):
  // if the update's registration is still the current one, cancel whatever is left of the old
  // poll and arm a new one, which reports any readiness.
  void on_update_failed(uint64_t old_tag, int res) {
    if (res >= 0) return;
    const int fd = fd_of(old_tag);
    Slot* slot = find(fd);
    if (!slot || generation_of(old_tag) != ((slot->generation - 1) & kGenerationMask)) return;
    queue_remove(old_tag);
    arm(fd, *slot);
  }

  void on_poll(uint64_t data, int res, bool more, ReadyEvent* events, int* n) {
    Slot* slot = current(data);
    if (!slot) return;  // removed, closed or replaced since: never hand its target back
    if (!more) {
      // One-shot polls end with every report; a multishot one ends when the kernel could not
      // queue a completion (overflow) or cancelled it (-ECANCELED). Arm it again: the kernel
      // reports a readiness that is already there. Any other error (EBADF: closed without
      // close()) is reported as a hang-up once, and the target's next read says what it is.
      if (res >= 0 || res == -ECANCELED) {
        arm(fd_of(data), *slot);
      } else {
        res = POLLERR;
      }
    }
    if (res <= 0) return;
    uint32_t readiness = 0;
    if (res & POLLIN) readiness |= kIn;
    if (res & POLLOUT) readiness |= kOut;
    if (res & (POLLHUP | POLLERR | POLLRDHUP)) readiness |= kHangup;
    if (!readiness) return;
    // Several wake-ups of one file in one wait() are one event, as epoll reports them.
    if (slot->batch == batch_ && slot->event >= 0) {
      events[slot->event].readiness |= readiness;
      return;
    }
    slot->batch = batch_;
    slot->event = *n;
    events[(*n)++] = {slot->target, readiness};
  }

  io_uring ring_{};
  bool started_ = false;
  std::vector<Slot> slots_;
  uint32_t batch_ = 0;
};

}  // namespace

std::unique_ptr<Poller> make_uring_poller(std::string* error) {
  auto poller = std::make_unique<UringPoller>();
  if (!poller->start(kSubmissionEntries, error)) return nullptr;
  return poller;
}

BackendChoice choose_backend(Backend wanted) {
  BackendChoice choice;
  if (wanted == Backend::kEpoll) return choice;
  io_uring ring;
  if (make_ring(&ring, 8, &choice.reason)) {
    io_uring_queue_exit(&ring);
    choice.backend = Backend::kIoUring;
    return choice;
  }
  choice.ok = wanted == Backend::kAuto;
  return choice;
}

std::unique_ptr<Poller> make_poller(Backend backend) {
  if (backend == Backend::kIoUring) {
    std::string error;
    if (auto poller = make_uring_poller(&error)) return poller;
    LOG_ERROR("io_uring: %s; this worker uses epoll", error.c_str());
  }
  return make_epoll_poller();
}

}  // namespace peregrine::event
