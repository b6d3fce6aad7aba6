// Timeouts for connections. Every connection in a given state waits the same duration (header,
// keep-alive, body, send), so one FIFO list per duration keeps deadlines sorted for free:
// arming is an append, disarming an unlink, and expiry pops from the front. No heap, no
// allocation, O(1) everything.
#pragma once

#include <cstdint>

namespace peregrine::event {

class TimerList;

// Whatever can time out: a client connection, later an upstream connection.
class TimerOwner {
 public:
  virtual void on_timeout() = 0;

 protected:
  ~TimerOwner() = default;
};

// Embedded in the object that can time out; `owner` is told when it expires.
struct TimerNode {
  TimerOwner* owner = nullptr;
  TimerNode* prev = nullptr;
  TimerNode* next = nullptr;
  TimerList* list = nullptr;
  int64_t deadline_ms = 0;
  bool armed() const { return list != nullptr; }
};

class TimerList {
 public:
  explicit TimerList(int64_t duration_ms = 0) : duration_ms_(duration_ms) {}
  TimerList(const TimerList&) = delete;
  TimerList& operator=(const TimerList&) = delete;

  void set_duration(int64_t ms) { duration_ms_ = ms; }
  int64_t duration() const { return duration_ms_; }

  // (Re)arms `node` to fire duration() after now_ms, moving it from any list it was on.
  void arm(TimerNode& node, int64_t now_ms) {
    disarm(node);
    node.deadline_ms = now_ms + duration_ms_;
    node.list = this;
    node.prev = tail_;
    node.next = nullptr;
    if (tail_)
      tail_->next = &node;
    else
      head_ = &node;
    tail_ = &node;
  }

  static void disarm(TimerNode& node) {
    TimerList* list = node.list;
    if (!list) return;
    if (node.prev)
      node.prev->next = node.next;
    else
      list->head_ = node.next;
    if (node.next)
      node.next->prev = node.prev;
    else
      list->tail_ = node.prev;
    node.prev = node.next = nullptr;
    node.list = nullptr;
  }

  // The earliest node whose deadline has passed, unlinked; null when none.
  TimerNode* pop_expired(int64_t now_ms) {
    if (!head_ || head_->deadline_ms > now_ms) return nullptr;
    TimerNode* node = head_;
    disarm(*node);
    return node;
  }

  // Milliseconds until the next deadline, or -1 when the list is empty.
  int64_t next_in(int64_t now_ms) const {
    if (!head_) return -1;
    return head_->deadline_ms > now_ms ? head_->deadline_ms - now_ms : 0;
  }

  bool empty() const { return head_ == nullptr; }

 private:
  TimerNode* head_ = nullptr;
  TimerNode* tail_ = nullptr;
  int64_t duration_ms_;
};

}  // namespace peregrine::event
