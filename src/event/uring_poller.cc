// The event::Poller interface on io_uring: readiness through IORING_OP_POLL_ADD, every request
// queued during a loop iteration submitted by the next wait() in the same system call that
// waits for completions. See docs/io_uring.md.
//
// A kReceive registration has a multishot receive beside its poll (which then watches only
// writability and hang-ups): the kernel reads the socket as bytes come, into buffers of the
// worker's provided buffer ring, and each completion is handed over as it is; its buffer goes
// back to the ring at the next wait(), once the event has been dispatched.
//
// A kAccept registration (a listening socket) has a multishot accept instead of a poll: each
// completion is a new connection's descriptor.
//
// Each registration lives in a table indexed by descriptor, with a generation that every add,
// modify and remove advances. A poll's user_data carries (generation, fd): a completion whose
// generation is not the slot's current one belongs to a registration that is gone (removed,
// closed, replaced) and is dropped, so no pointer to a freed target is ever handed back, even
// when the descriptor number was reused meanwhile.
#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/log.h"
#include "event/batch_wait.h"
#include "event/poller.h"

namespace peregrine::event {
namespace {

// Every flag here needs Linux 5.19, which also has everything else used (multishot and
// updatable polls, IORING_FEAT_NODROP, timeouts passed to io_uring_enter).
constexpr unsigned kSetupFlags =
    IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
// Linux 6.1: the kernel's completion work (a socket's bytes copied out, a send finished) waits
// for our next io_uring_enter and runs there in one batch, instead of interrupting the worker
// as each packet comes. It needs a single submitting thread; a worker's poller is made on the
// main thread and runs on the worker's, so the ring starts disabled and the first thread to
// submit enables it (own()).
constexpr unsigned kDeferredFlags =
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED;
constexpr unsigned kSubmissionEntries = 1024;
// Room for one completion per connection of a busy worker before the kernel's overflow list
// (which it keeps, IORING_FEAT_NODROP, and we drain) is needed.
constexpr unsigned kCompletionEntries = 8192;

// The provided buffer ring of kReceive sockets. Requests are small: a buffer holds a typical
// head; a larger one arrives in several. The kernel takes buffers in ring order, so all of them
// are touched under load: 1 MiB a worker.
constexpr unsigned kReceiveBuffers = 512;
constexpr unsigned kReceiveBufferSize = 2048;
constexpr size_t kReceiveBytes = size_t{kReceiveBuffers} * kReceiveBufferSize;
constexpr int kBufferGroup = 0;
// A send's copy keeps its memory for the next one up to this size.
constexpr size_t kKeptSendCapacity = 4 * 1024;

// The batch wait (Linux 6.12, IORING_FEAT_MIN_TIMEOUT): when should_batch_wait(), a wait sleeps
// until the batch wait and the thread's timer slack have passed (hold_us_: as long as epoll's
// nanosleep lasts under load) or kMaxBatchWait completions are ready besides those of the sends
// just queued (then returns with what there is, or waits on for the first one), so a busy
// worker wakes once for what would have been several wake-ups (docs/architecture.md, "Waiting
// in batches").
#ifndef IORING_FEAT_MIN_TIMEOUT  // liburing 2.3's header predates it
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)
#endif

// user_data: bit 63 marks our removals, bit 62 our updates (their own completions, not the
// polls'), bit 61 receives, bit 60 sends and bit 59 accepts (with bit 63: their cancellations),
// bits 32..58 the generation, bits 0..31 the descriptor (a send's: its index in sends_).
constexpr uint64_t kRemoval = uint64_t{1} << 63;
constexpr uint64_t kUpdate = uint64_t{1} << 62;
constexpr uint64_t kReceiving = uint64_t{1} << 61;
constexpr uint64_t kSending = uint64_t{1} << 60;
constexpr uint64_t kAccepting = uint64_t{1} << 59;
constexpr uint32_t kGenerationMask = 0x07ffffff;

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
  // A receiving socket's end of file and errors come with its receive.
  if (interest & kReceive) return POLLOUT;
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

// Multishot receive came with Linux 6.0 (the ring's own checks need 5.19).
bool kernel_has_multishot_receive() {
  utsname name{};
  if (uname(&name) != 0) return false;
  int major = 0;
  if (std::sscanf(name.release, "%d.", &major) != 1) return false;
  return major >= 6;
}

bool make_ring(io_uring* ring, unsigned entries, unsigned flags, std::string* error) {
  io_uring_params params{};
  params.flags = flags;
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
  explicit UringPoller(unsigned batch_wait_us) : hold_us_(batch_wait_us) {}
  // False (and `error` says why) when no ring can be made.
  bool start(unsigned entries, std::string* error) {
    disabled_ = make_ring(&ring_, entries, kSetupFlags | kDeferredFlags, nullptr);
    started_ = disabled_ || make_ring(&ring_, entries, kSetupFlags, error);
    owned_ = !disabled_;
    if (started_ && kernel_has_multishot_receive()) start_receiving();
    return started_;
  }
  ~UringPoller() override {
    if (started_) io_uring_queue_exit(&ring_);  // cancels every poll
    if (buffer_ring_) munmap(buffer_ring_, buffer_ring_bytes());
    if (buffers_) munmap(buffers_, kReceiveBytes);
  }

  bool receives() const override { return buffer_ring_ != nullptr; }
  bool accepts() const override { return true; }  // multishot accept: Linux 5.19, as the ring

  bool send(int fd, std::string_view bytes) override {
    Slot* slot = find(fd);
    if (!slot || slot->send >= 0) return false;
    if (free_sends_.empty()) {
      free_sends_.push_back(static_cast<uint32_t>(sends_.size()));
      sends_.push_back(std::make_unique<Send>());
    }
    const uint32_t id = free_sends_.back();
    free_sends_.pop_back();
    Send& out = *sends_[id];
    out.fd = fd;
    out.generation = slot->generation;
    out.bytes.assign(bytes);
    out.sent = 0;
    slot->send = static_cast<int32_t>(id);
    queue_send(id);
    return true;
  }

  void pause_receiving(int fd) override {
    Slot* slot = find(fd);
    if (!slot) return;
    if (slot->receive == Receive::kOn) {
      queue_cancel(kReceiving | tag(fd, slot->receive_generation));
      slot->receive = Receive::kStopping;
    }
    slot->resume = false;
  }

  void resume_receiving(int fd) override {
    Slot* slot = find(fd);
    if (!slot) return;
    if (slot->receive == Receive::kOff) {
      arm_receive(fd, *slot);
    } else if (slot->receive == Receive::kStopping) {
      slot->resume = true;  // armed again once the kernel says the old one is gone
    }
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
    if (slot.target)
      forget(fd, slot);
    else
      ++registered_;
    slot.target = target;
    slot.interest = interest;
    ++slot.generation;
    if (interest & kAccept) {
      arm_accept(fd, slot);
      return true;
    }
    arm(fd, slot);
    if ((interest & kReceive) && receives()) arm_receive(fd, slot);
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
    if (((slot->interest | interest) & kAccept) || ((slot->interest ^ interest) & kReceive)) {
      // Receiving is fixed when the descriptor is added: what an ended receive had taken from
      // the socket would otherwise race with the reads of a readiness registration. Accepting
      // has nothing to change.
      errno = EINVAL;
      return false;
    }
    if (slot->receive == Receive::kOn) {
      // The receive's completions carry the old tag: cancel it, and take it up again under the
      // new one once it is gone, so every byte still reaches the (possibly new) target in order.
      // One already stopping (paused, or an earlier modify) is left as it is: a second cancel
      // would find nothing, and a pause must stay a pause.
      queue_cancel(kReceiving | old_tag);
      slot->receive = Receive::kStopping;
      slot->resume = true;
    }
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
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    return true;
  }

  void remove(int fd) override {
    Slot* slot = find(fd);
    if (!slot) return;
    forget(fd, *slot);
    --registered_;
    slot->target = nullptr;
    ++slot->generation;  // a completion already on its way is now stale
  }

  void close(int fd) override {
    remove(fd);
    ::close(fd);
  }

  int wait(int timeout_ms, ReadyEvent* events, int capacity) override {
    own();
    capacity = std::min(capacity, 0xffff);  // an event's index fits a Slot's 16 bits
    give_back_buffers();                    // the last batch's events have been dispatched
    io_uring_cqe* cqe = nullptr;
    // Completions left over from the last batch (more than it could take) are not held.
    bool held = false;
    if (hold_us_ > 0 && timeout_ms != 0 && io_uring_cq_ready(&ring_) == 0 &&
        (ring_.features & IORING_FEAT_MIN_TIMEOUT) && rule_.hold(registered_)) {
      submit_and_wait_batch(timeout_ms);
      held = true;
    } else if (timeout_ms < 0) {
      io_uring_submit_and_wait(&ring_, 1);
    } else {
      __kernel_timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000LL};
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);  // -ETIME, -EINTR: 0 events
    }
    sends_since_wait_ = 0;
    ++batch_;
    int n = 0;
    // Only the completions there now (and, once, those the kernel kept aside). Handling them
    // submits (when the submission queue is full) and so makes more: a multishot poll ended by
    // an overflowing ring and armed again, a removal refused (-EALREADY) and asked again. Many
    // add no event (a poll already reported in this batch), so the loop went on for as long as
    // they came: with 1,000 compressed downloads whose clients had closed, the worker spun in
    // io_poll_remove and a SIGTERM did not stop it within 10 s.
    unsigned budget = io_uring_cq_ready(&ring_);
    bool brought_in = false;
    while (n < capacity) {
      if (budget == 0 || io_uring_peek_cqe(&ring_, &cqe) != 0) {
        // The CQ ring filled up and the kernel kept the rest aside: bring them in now that
        // there is room.
        if (brought_in || !io_uring_cq_has_overflow(&ring_)) break;
        brought_in = true;
        io_uring_get_events(&ring_);
        budget = io_uring_cq_ready(&ring_);
        if (budget == 0 || io_uring_peek_cqe(&ring_, &cqe) != 0) break;
      }
      --budget;
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      const unsigned flags = cqe->flags;
      const bool more = flags & IORING_CQE_F_MORE;
      io_uring_cqe_seen(&ring_, cqe);
      if ((data & (kAccepting | kRemoval)) == (kAccepting | kRemoval)) {
        // An accept's cancellation: as a receive's.
        if (res == -EALREADY) queue_cancel(data & ~kRemoval);
      } else if (data & kAccepting) {
        on_accept(data & ~kAccepting, res, flags, events, &n);
      } else if ((data & (kSending | kRemoval)) == (kSending | kRemoval)) {
        // A send's cancellation: its own completion ends it (and frees its bytes).
        if (res == -EALREADY) queue_cancel_send(static_cast<uint32_t>(data));
      } else if (data & kSending) {
        on_send(static_cast<uint32_t>(data), res, events, &n);
      } else if ((data & (kReceiving | kRemoval)) == (kReceiving | kRemoval)) {
        // A receive's cancellation: -EALREADY as for polls below; anything else, the receive's
        // own last completion says it is gone.
        if (res == -EALREADY) queue_cancel(data & ~kRemoval);
      } else if (data & kReceiving) {
        on_receive(data & ~kReceiving, res, flags, events, &n);
      } else if (data & kUpdate) {
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
    rule_.reported(static_cast<unsigned>(n), held);
    return n;
  }

 private:
  // A kReceive registration's multishot receive: on, being cancelled (its last completion has
  // not come yet), or off (paused, ended, or never armed). A kAccept one's accept: on or off.
  enum class Receive : uint8_t { kOff, kOn, kStopping };

  // One per descriptor number up to the highest registered: 10,000 idle connections hold
  // 10,000 of them, which issue 15 wants in under 3 MB with everything else. Packed to 24 bytes
  // from 40 (bench/run.py --scenarios idle10k: 0.32 KB a connection before, 0.31 after).
  struct Slot {
    Pollable* target = nullptr;    // null: not registered
    uint32_t generation : 27 = 0;  // wraps with kGenerationMask
    Receive receive : 2 = Receive::kOff;
    bool resume : 1 = false;  // kStopping: arm a new receive once the old one is gone
    bool ended : 1 = false;   // the receive reported the end of the stream: never armed again
    // The generation the receive was armed under, which its completions carry (older than
    // `generation` once a modify() has it stopping).
    uint32_t receive_generation = 0;
    int32_t send = -1;  // the send in flight (its index in sends_), or -1
    // Where in the events of the wait() that last reported it (only trusted if that event is
    // still this target's readiness: see on_poll).
    uint16_t event = 0;
    // The wait() after which the receive was last armed, modulo 256: a stale match only costs
    // forget() an early submission.
    uint8_t receive_batch = 0;
    uint8_t interest = 0;
  };
  static_assert(kAccept < 0x100, "every Interest bit fits Slot::interest");
  static_assert(sizeof(Slot) == 24);

  // A send's own copy of its bytes, kept until its last completion: the kernel reads them when
  // it runs the send, maybe after the caller has moved on (or closed).
  struct Send {
    int fd = -1;
    uint32_t generation = 0;
    std::string bytes;
    size_t sent = 0;
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

  // The calling thread becomes the only one that may submit (and register) from now on.
  void own() {
    if (owned_) return;
    owned_ = true;
    owner_ = std::this_thread::get_id();
    // liburing 2.3 declares io_uring_enable_rings() but does not export it.
    if (disabled_)
      syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    // io_uring_enter then names the ring by a per-thread index, skipping a descriptor lookup.
    io_uring_register_ring_fd(&ring_);
    // epoll's hold is a nanosleep, which the kernel may end up to the thread's timer slack
    // late (50 us by default), and does under load. The kernel's min_wait has no slack, so it
    // is given the same length: holding for 100 us against epoll's ~150 made a third more
    // wake-ups, and PHP hello cost 1.19x epoll's CPU per request.
    const int slack_ns = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (hold_us_ > 0 && slack_ns > 0) hold_us_ += slack_ns / 1000;
  }

  // False on any thread but the ring's: a worker is destroyed on the main thread after its loop
  // has ended, and the kernel refuses that thread's submissions (SINGLE_ISSUER).
  bool can_submit() {
    own();
    return owner_ == std::this_thread::get_id();
  }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {  // the submission queue is full: hand it to the kernel now
      // Nothing will be submitted any more: the ring's teardown, which follows, cancels every
      // request (and lets go of its file) as what would be queued here would have.
      if (!can_submit()) return &unsubmitted_;
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

  // The registration goes (removed, or its descriptor reused): its poll and its receive.
  void forget(int fd, Slot& slot) {
    // A send, or a receive or accept armed since the last wait, names the socket by its number,
    // which the kernel resolves at submission: hand them over now, before the caller's close(2)
    // lets the next accept reuse the number (a send would reach that client; a receive would
    // take its bytes). Then cancel them.
    if ((slot.send >= 0 ||
         (slot.receive == Receive::kOn && slot.receive_batch == static_cast<uint8_t>(batch_))) &&
        can_submit())
      io_uring_submit(&ring_);
    if (slot.send >= 0) {
      queue_cancel_send(static_cast<uint32_t>(slot.send));
      slot.send = -1;
    }
    const uint64_t current = tag(fd, slot.generation);
    if (slot.interest & kAccept) {
      if (slot.receive == Receive::kOn) cancel_accept(kAccepting | current);
    } else {
      queue_remove(current);
      if (slot.receive == Receive::kOn) queue_cancel(kReceiving | current);
    }
    slot.receive = Receive::kOff;
    slot.resume = slot.ended = false;
  }

  void queue_remove(uint64_t poll_tag) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_remove(sqe, poll_tag);
    io_uring_sqe_set_data64(sqe, kRemoval | poll_tag);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
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
    // Several wake-ups of one file in one wait() are one event, as epoll reports them. The slot
    // remembers where its last event went; that is this wait's if the event there is still its
    // target's readiness (a receive's bytes, a send or an accept are other kinds).
    if (slot->event < *n) {
      ReadyEvent& earlier = events[slot->event];
      if (earlier.target == slot->target &&
          !(earlier.readiness & (kReceived | kSent | kAccepted))) {
        earlier.readiness |= readiness;
        return;
      }
    }
    slot->event = static_cast<uint16_t>(*n);
    events[(*n)++] = {slot->target, readiness};
  }

  // ---- Receiving ----

  size_t buffer_ring_bytes() const { return sizeof(io_uring_buf) * kReceiveBuffers; }

  // The provided buffer ring; without it (a kernel that refuses it) kReceive is not offered.
  void start_receiving() {
    void* ring_memory = mmap(nullptr, buffer_ring_bytes(), PROT_READ | PROT_WRITE,
                             MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    void* buffer_memory =
        mmap(nullptr, kReceiveBytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (ring_memory == MAP_FAILED || buffer_memory == MAP_FAILED) {
      if (ring_memory != MAP_FAILED) munmap(ring_memory, buffer_ring_bytes());
      if (buffer_memory != MAP_FAILED) munmap(buffer_memory, kReceiveBytes);
      return;
    }
    auto* ring = static_cast<io_uring_buf_ring*>(ring_memory);
    io_uring_buf_ring_init(ring);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<uintptr_t>(ring);
    registration.ring_entries = kReceiveBuffers;
    registration.bgid = kBufferGroup;
    if (io_uring_register_buf_ring(&ring_, &registration, 0) != 0) {
      munmap(ring_memory, buffer_ring_bytes());
      munmap(buffer_memory, kReceiveBytes);
      return;
    }
    buffer_ring_ = ring;
    buffers_ = static_cast<char*>(buffer_memory);
    for (unsigned id = 0; id < kReceiveBuffers; ++id) lent_.push_back(static_cast<uint16_t>(id));
    give_back_buffers();
  }

  char* buffer(unsigned id) { return buffers_ + size_t{id} * kReceiveBufferSize; }

  void give_back_buffers() {
    if (lent_.empty()) return;
    const int mask = io_uring_buf_ring_mask(kReceiveBuffers);
    for (size_t i = 0; i < lent_.size(); ++i)
      io_uring_buf_ring_add(buffer_ring_, buffer(lent_[i]), kReceiveBufferSize, lent_[i], mask,
                            static_cast<int>(i));
    io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(lent_.size()));
    lent_.clear();
  }

  void arm_receive(int fd, Slot& slot) {
    if (slot.ended) return;
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, kReceiving | tag(fd, slot.generation));
    slot.receive_generation = slot.generation;
    slot.receive = Receive::kOn;
    slot.receive_batch = static_cast<uint8_t>(batch_);
    slot.resume = false;
  }

  // Cancels the multishot receive or accept whose user_data is `data`.
  void queue_cancel(uint64_t data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, data, 0);
    io_uring_sqe_set_data64(sqe, kRemoval | data);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  }

  // A receive's completion: bytes (in a ring buffer, lent until the next wait), or its end.
  void on_receive(uint64_t data, int res, unsigned flags, ReadyEvent* events, int* n) {
    const char* bytes = nullptr;
    if (flags & IORING_CQE_F_BUFFER) {
      const unsigned id = flags >> IORING_CQE_BUFFER_SHIFT;
      lent_.push_back(static_cast<uint16_t>(id));
      bytes = buffer(id);
    }
    Slot* slot = find(fd_of(data));
    if (!slot) return;  // removed, closed or replaced: its bytes go nowhere
    const uint32_t generation = generation_of(data);
    const bool current = (slot->generation & kGenerationMask) == generation;
    // After modify(), the old receive's last bytes still belong to the registration.
    const bool stopping = slot->receive == Receive::kStopping &&
                          (slot->receive_generation & kGenerationMask) == generation;
    if (!current && !stopping) return;
    if (!(flags & IORING_CQE_F_MORE)) {
      // The receive is over: cancelled (paused, or modified), out of buffers (-ENOBUFS: the
      // bytes wait in the socket; the buffers come back at the next wait, and so does the
      // receive), the end of the stream (0), or an error.
      if (res > 0 || res == -ENOBUFS || res == -ECANCELED) {
        const bool again = slot->receive == Receive::kOn || slot->resume;
        slot->receive = Receive::kOff;
        if (again) arm_receive(fd_of(data), *slot);
      } else {
        slot->receive = Receive::kOff;
        slot->ended = true;
        res = 0;
      }
    }
    if (res < 0) return;
    events[(*n)++] = {slot->target, kReceived, static_cast<uint32_t>(res), bytes};
  }

  // ---- Accepting ----

  void arm_accept(int fd, Slot& slot) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, kAccepting | tag(fd, slot.generation));
    slot.receive = Receive::kOn;
    slot.receive_batch = static_cast<uint8_t>(batch_);
  }

  // At once: a queued cancellation would leave the accept taking connections from the backlog
  // until the next wait, only for us to close them, when another worker, or the new process of
  // an upgrade, accepts from the same socket and would serve them. And its end is run at once
  // (deferred completion work), which lets go of the socket: the caller's close(2) then closes
  // it, refusing new connections, even if this worker never waits again (a graceful stop).
  void cancel_accept(uint64_t data) {
    io_uring_sync_cancel_reg cancel{};
    cancel.addr = data;
    cancel.timeout.tv_sec = cancel.timeout.tv_nsec = -1;  // no timeout
    const int rc = io_uring_register_sync_cancel(&ring_, &cancel);
    if (rc >= 0) {
      io_uring_get_events(&ring_);
    } else if (rc != -ENOENT) {
      queue_cancel(data);  // -EEXIST: not the ring's thread (a worker destroyed on the main thread)
    }
  }

  // A new connection, or the accept's end. One that comes for a registration that is gone
  // (removed, closed) is nobody's: closed here.
  void on_accept(uint64_t data, int res, unsigned flags, ReadyEvent* events, int* n) {
    Slot* slot = current(data);
    if (!slot) {
      if (res >= 0) ::close(res);
      return;
    }
    if (!(flags & IORING_CQE_F_MORE)) {
      // Ended by an error (EMFILE...: the target hears of it) or by the kernel: accept again
      // with the next wait, as a listener that stays readable is reported again. Not when the
      // socket itself is wrong: that would never end.
      slot->receive = Receive::kOff;
      if (res != -EBADF && res != -EINVAL && res != -ENOTSOCK && res != -EOPNOTSUPP)
        arm_accept(fd_of(data), *slot);
    }
    if (res >= 0) {
      events[(*n)++] = {slot->target, kAccepted, static_cast<uint32_t>(res)};
    } else if (res != -ECANCELED) {
      events[(*n)++] = {slot->target, kAccepted | kHangup, static_cast<uint32_t>(-res)};
    }
  }

  // ---- Sending ----

  void queue_send(uint32_t id) {
    ++sends_since_wait_;
    Send& out = *sends_[id];
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_send(sqe, out.fd, out.bytes.data() + out.sent, out.bytes.size() - out.sent,
                       MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, kSending | id);
  }

  void queue_cancel_send(uint32_t id) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, kSending | id, 0);
    io_uring_sqe_set_data64(sqe, kSending | kRemoval | id);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  }

  // A send's completion: a partial one goes on with the rest; the end is reported to the
  // registration if it is still the one that sent.
  void on_send(uint32_t id, int res, ReadyEvent* events, int* n) {
    Send& out = *sends_[id];
    Slot* slot = find(out.fd);
    const bool current = slot && slot->send == static_cast<int32_t>(id) &&
                         (slot->generation & kGenerationMask) == (out.generation & kGenerationMask);
    if (current && res > 0) {
      out.sent += static_cast<size_t>(res);
      if (out.sent < out.bytes.size()) {
        queue_send(id);
        return;
      }
    }
    if (out.bytes.capacity() > kKeptSendCapacity) std::string().swap(out.bytes);
    free_sends_.push_back(id);
    if (!current) return;
    slot->send = -1;
    events[(*n)++] = {slot->target, res > 0 ? uint32_t{kSent} : uint32_t{kSent | kHangup}};
  }

  // io_uring_submit_and_wait_min_timeout() of liburing 2.8, by hand: publishes the queued
  // submissions (as io_uring_submit() does) and enters once to submit them and wait for the
  // batch with the batch wait.
  void submit_and_wait_batch(int timeout_ms) {
    io_uring_sq& sq = ring_.sq;
    const unsigned tail = sq.sqe_tail;
    if (sq.sqe_head != tail) {
      sq.sqe_head = tail;
      io_uring_smp_store_release(sq.ktail, tail);
    }
    const unsigned to_submit = tail - io_uring_smp_load_acquire(sq.khead);
    // Without a timeout the kernel would return empty-handed once the batch wait is over; with
    // one it waits on for the first completion.
    const int64_t ms = timeout_ms < 0 ? int64_t{3600} * 1000 : timeout_ms;
    __kernel_timespec ts{ms / 1000, (ms % 1000) * 1000000LL};
    io_uring_getevents_arg arg{};
    arg.ts = reinterpret_cast<uint64_t>(&ts);
    arg.pad = hold_us_;  // min_wait_usec, in Linux 6.12's header
    // A send's completion is posted as the send is submitted, in this very enter: up to
    // kMaxBatchWait of the sends queued since the last wait are not counted toward the batch
    // (docs/io_uring.md, "Waiting in batches").
    const unsigned batch = kMaxBatchWait + std::min(sends_since_wait_, kMaxBatchWait);
    ::syscall(__NR_io_uring_enter, ring_.ring_fd, to_submit, batch,
              IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg, sizeof arg);
  }

  io_uring ring_{};
  bool started_ = false;
  bool disabled_ = false;  // made with kDeferredFlags: no submission before own()
  bool owned_ = false;
  std::thread::id owner_;
  io_uring_sqe unsubmitted_{};  // next_sqe() on a thread that cannot submit
  std::vector<std::unique_ptr<Send>> sends_;
  std::vector<uint32_t> free_sends_;
  unsigned sends_since_wait_ = 0;
  io_uring_buf_ring* buffer_ring_ = nullptr;
  char* buffers_ = nullptr;
  std::vector<uint16_t> lent_;  // buffers handed over in the last batch
  std::vector<Slot> slots_;
  uint32_t batch_ = 0;
  BatchWaitRule rule_;
  unsigned registered_ = 0;  // descriptors with a target (should_batch_wait)
  // The batch wait, and from own() on the thread's timer slack with it; 0: no batch wait.
  unsigned hold_us_ = kDefaultBatchWaitUs;
};

}  // namespace

std::unique_ptr<Poller> make_uring_poller(std::string* error, unsigned batch_wait_us) {
  auto poller = std::make_unique<UringPoller>(batch_wait_us);
  if (!poller->start(kSubmissionEntries, error)) return nullptr;
  return poller;
}

BackendChoice choose_backend(Backend wanted) {
  BackendChoice choice;
  if (wanted == Backend::kEpoll) return choice;
  io_uring ring;
  if (make_ring(&ring, 8, kSetupFlags, &choice.reason)) {
    io_uring_queue_exit(&ring);
    choice.backend = Backend::kIoUring;
    return choice;
  }
  choice.ok = wanted == Backend::kAuto;
  return choice;
}

std::unique_ptr<Poller> make_poller(Backend backend, unsigned batch_wait_us) {
  if (backend == Backend::kIoUring) {
    std::string error;
    if (auto poller = make_uring_poller(&error, batch_wait_us)) return poller;
    LOG_ERROR("io_uring: %s; this worker uses epoll", error.c_str());
  }
  return make_epoll_poller(batch_wait_us);
}

}  // namespace peregrine::event
