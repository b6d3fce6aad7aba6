// Objects that receive events (upstream connections, exchanges, pooled sockets) may be done in
// the middle of a batch of ready events while a later event in the same batch still points at
// them. They are handed here instead of deleted, and the worker frees them after the batch.
#pragma once

#include <vector>

namespace peregrine::event {

class Disposable {
 public:
  virtual ~Disposable() = default;
};

namespace detail {
inline std::vector<Disposable*>& disposal_list() {
  thread_local std::vector<Disposable*> list;
  return list;
}
}  // namespace detail

// Deletes `object` once the current batch of events has been handled (this thread's loop).
inline void dispose_later(Disposable* object) {
  detail::disposal_list().push_back(object);
}

// Called by the event loop between batches. A deletion may dispose of more objects: they are
// deleted in the next round. The two lists trade places and keep their capacity (this runs after
// every batch; a fresh vector each time was an allocation per request).
inline void dispose_pending() {
  std::vector<Disposable*>& list = detail::disposal_list();
  thread_local std::vector<Disposable*> batch;
  while (!list.empty()) {
    batch.swap(list);
    for (Disposable* object : batch) delete object;
    batch.clear();
  }
}

}  // namespace peregrine::event
