#include "handlers/application/async_call.h"

#include <exception>
#include <new>
#include <utility>

#include "core/log.h"

namespace peregrine::detail {

namespace {

constexpr size_t kKeepCalls = 64;
// A response or body buffer that grew past this (a big body) is not worth keeping around.
constexpr size_t kKeepBytes = 16 * 1024;

struct SpareCalls {
  std::vector<Call*> list;
  ~SpareCalls();
};

SpareCalls& spare_calls() {
  thread_local SpareCalls spares;
  return spares;
}

}  // namespace

// At the thread's exit. Call's destructor is private: reached through Exchange's virtual one.
SpareCalls::~SpareCalls() {
  for (Call* call : list) delete static_cast<handlers::Exchange*>(call);
}

Call* Call::make(const Request& request, handlers::Downstream& downstream, Worker& worker) {
  std::vector<Call*>& spares = spare_calls().list;
  Call* call;
  if (spares.empty()) {
    call = new Call;
  } else {
    call = spares.back();
    spares.pop_back();
  }
  call->refs_ = 1;  // the link: the connection holds us until the exchange ends
  call->request_ = &request;
  call->downstream_ = &downstream;
  call->worker_ = &worker;
  call->handles_ = 0;
  call->linked_ = true;
  call->done_ = false;
  call->cancelled_ = false;
  call->head_sent_ = false;
  call->has_body_ = request.has_body();
  call->body_paused_ = false;
  call->body_ended_ = false;
  call->has_pending_ = false;
  call->pending_last_ = false;
  call->in_read_suspend_ = false;
  call->delivery_scheduled_ = false;
  call->next_listener_ = 1;
  return call;
}

// What make() does not set again is cleared here: the response, the body buffers, callbacks
// (they may hold what the application captured) and coroutine handles.
void Call::recycle() {
  std::vector<Call*>& spares = spare_calls().list;
  if (!kRecycleAllocations || spares.size() >= kKeepCalls || response_.capacity() > kKeepBytes ||
      pending_.capacity() > kKeepBytes || chunk_.capacity() > kKeepBytes) {
    delete static_cast<handlers::Exchange*>(this);
    return;
  }
  response_.clear();
  pending_.clear();
  chunk_.clear();
  if (body_callback_) body_callback_ = nullptr;
  if (writable_callback_) writable_callback_ = nullptr;
  if (!cancel_listeners_.empty()) cancel_listeners_.clear();
  reader_ = {};
  writer_ = {};
  spares.push_back(this);
}

void Call::drop_handle() {
  if (--handles_ == 0 && !done_) {
    // Nothing can answer any more: better a 500 now than a client waiting for its timeout.
    LOG_ERROR("application handler for \"%.*s %.*s\" dropped its response without answering",
              static_cast<int>(request_->method_text.size()), request_->method_text.data(),
              static_cast<int>(request_->target.size()), request_->target.data());
    fail(500);
  }
  release();
}

// ---- The request body ----------------------------------------------------------------------

bool Call::on_body(std::string_view bytes, bool last) {
  if (done_) return true;  // answered already: the connection discards the rest
  if (body_callback_ && !has_pending_) {
    Ref<Call> keep(this);
    auto callback = std::move(body_callback_);
    bool more = callback(BodyPiece{bytes, last, false});
    if (!body_callback_ && !done_) body_callback_ = std::move(callback);
    if (last) body_ended_ = true;
    if (!more && !last) body_paused_ = true;
    return more || last;
  }
  // Nobody is reading yet: keep this one piece and pause the connection until it is taken.
  pending_.append(bytes);
  has_pending_ = true;
  pending_last_ = last;
  if (!last) body_paused_ = true;
  if (!delivery_scheduled_ && !in_read_suspend_ && (reader_ || body_callback_)) {
    delivery_scheduled_ = true;
    worker_->after(std::chrono::milliseconds(0), [self = Ref<Call>(this)] {
      self->delivery_scheduled_ = false;
      if (self->reader_)
        self->wake_reader();
      else
        self->deliver_pending();
    });
  }
  return last;
}

void Call::wake_reader() {
  if (!reader_) return;
  std::coroutine_handle<> reader = std::exchange(reader_, {});
  reader.resume();
}

void Call::set_body_callback(std::function<bool(const BodyPiece&)> callback) {
  body_callback_ = std::move(callback);
  if (delivery_scheduled_ || !(has_pending_ || (!has_body_ && !body_ended_))) return;
  delivery_scheduled_ = true;
  worker_->after(std::chrono::milliseconds(0), [self = Ref<Call>(this)] {
    self->delivery_scheduled_ = false;
    self->deliver_pending();
  });
}

void Call::deliver_pending() {
  if (done_ || !body_callback_) return;
  BodyPiece piece;
  if (has_pending_) {
    chunk_.swap(pending_);
    pending_.clear();
    has_pending_ = false;
    piece = {chunk_, pending_last_, false};
  } else if (!has_body_ && !body_ended_) {
    piece.last = true;
  } else {
    return;
  }
  if (piece.last) body_ended_ = true;
  Ref<Call> keep(this);
  auto callback = std::move(body_callback_);
  bool more = callback(piece);
  if (!body_callback_ && !done_) body_callback_ = std::move(callback);
  if (more && !piece.last && body_paused_ && downstream_) {
    body_paused_ = false;
    downstream_->resume_body();  // may call on_body() again before it returns
  }
}

void Call::resume_body() {
  if (done_) return;
  if (has_pending_) {
    deliver_pending();
    return;
  }
  if (body_paused_ && downstream_) {
    body_paused_ = false;
    downstream_->resume_body();
  }
}

bool Call::read_ready() const {
  return done_ || has_pending_ || !has_body_ || body_ended_;
}

bool Call::read_suspend(std::coroutine_handle<> reader) {
  reader_ = reader;
  if (body_paused_ && downstream_) {
    // The piece before this one was taken: let the connection read on. It may hand us the next
    // piece (or end the exchange) before resume_body() returns; then there is no need to wait.
    Ref<Call> keep(this);
    body_paused_ = false;
    in_read_suspend_ = true;
    downstream_->resume_body();
    in_read_suspend_ = false;
    if (read_ready()) {
      reader_ = {};
      return false;
    }
  }
  return true;
}

BodyPiece Call::read_take() {
  if (cancelled_) return {{}, true, true};
  if (has_pending_) {
    chunk_.swap(pending_);
    pending_.clear();
    has_pending_ = false;
    if (pending_last_) body_ended_ = true;
    return {chunk_, pending_last_, false};
  }
  body_ended_ = true;  // no body, the body is over, or the response ended: nothing more comes
  return {{}, true, false};
}

// ---- The response --------------------------------------------------------------------------

void Call::respond() {
  if (done_) return;
  if (head_sent_) {  // the head is out: a second one would corrupt the stream
    finish();
    return;
  }
  Ref<Call> keep(this);
  downstream_->respond(response_);
  end(false);
}

bool Call::start(int64_t content_length) {
  if (done_) return false;
  if (head_sent_) return true;
  head_sent_ = true;
  if (response_.status() == 101) {
    // A tunnel: whatever the request said, the client's raw bytes follow from now on, until it
    // closes its sending side (the last piece).
    has_body_ = true;
    body_ended_ = false;
  }
  if (!downstream_->send_head(response_, content_length)) {
    Ref<Call> keep(this);
    end(true);
    return false;
  }
  return true;
}

IoStatus Call::send(std::string_view bytes) {
  if (done_) return IoStatus::kCancelled;
  if (!head_sent_ && !start(-1)) return IoStatus::kCancelled;
  switch (downstream_->send_body(bytes)) {
    case handlers::Downstream::Sent::kMore:
      return IoStatus::kOk;
    case handlers::Downstream::Sent::kFull:
      return IoStatus::kFull;
    case handlers::Downstream::Sent::kGone:
      break;
  }
  Ref<Call> keep(this);
  end(true);
  return IoStatus::kCancelled;
}

void Call::on_writable() {
  Ref<Call> keep(this);
  if (writer_) {
    std::coroutine_handle<> writer = std::exchange(writer_, {});
    writer.resume();
    return;
  }
  if (writable_callback_) {
    auto callback = std::move(writable_callback_);
    callback();
    if (!writable_callback_ && !done_) writable_callback_ = std::move(callback);
  }
}

void Call::finish() {
  if (done_) return;
  if (!head_sent_) {  // nothing streamed: a complete response has a Content-Length
    respond();
    return;
  }
  Ref<Call> keep(this);
  downstream_->finish();
  end(false);
}

void Call::fail(int status) {
  if (done_) return;
  Ref<Call> keep(this);
  downstream_->fail(status);
  end(false);
}

// ---- Ending and cancellation ---------------------------------------------------------------

void Call::on_abort() {
  Ref<Call> keep(this);
  end(true);
}

void Call::end(bool cancelled) {
  if (done_) return;
  Ref<Call> keep(this);
  done_ = true;
  cancelled_ = cancelled;
  downstream_ = nullptr;
  // Callbacks may hold copies of the AsyncResponse (a cycle through us): drop them now. One
  // that is running right now was moved out to the stack and is dropped by its caller.
  // (Tested first: assigning to an empty std::function is not free, and most are empty.)
  if (body_callback_) body_callback_ = nullptr;
  if (writable_callback_) writable_callback_ = nullptr;
  if (!cancelled && !cancel_listeners_.empty()) cancel_listeners_.clear();
  if (cancelled || reader_ || writer_) {
    // From the loop, not from inside the connection's call or the application's write.
    worker_->after(std::chrono::milliseconds(0), [self = Ref<Call>(this)] {
      while (!self->cancel_listeners_.empty()) {
        auto listener = std::move(self->cancel_listeners_.front().second);
        self->cancel_listeners_.erase(self->cancel_listeners_.begin());
        listener();
      }
      self->wake_reader();
      if (self->writer_) std::exchange(self->writer_, {}).resume();
    });
  }
  if (linked_) {
    linked_ = false;
    release();
  }
}

uint64_t Call::add_cancel_listener(std::function<void()> callback) {
  if (cancelled_) {
    callback();
    return 0;
  }
  if (done_) return 0;  // answered: it can no longer be cancelled
  uint64_t id = next_listener_++;
  cancel_listeners_.emplace_back(id, std::move(callback));
  return id;
}

void Call::remove_cancel_listener(uint64_t id) {
  for (auto it = cancel_listeners_.begin(); it != cancel_listeners_.end(); ++it) {
    if (it->first == id) {
      cancel_listeners_.erase(it);
      return;
    }
  }
}

}  // namespace peregrine::detail

namespace peregrine {

// ---- AsyncResponse -------------------------------------------------------------------------

AsyncResponse::AsyncResponse(detail::Call* call) : call_(call) {
  call_->add_ref();
  call_->add_handle();
}
AsyncResponse::AsyncResponse(const AsyncResponse& other) : AsyncResponse(other.call_) {}
AsyncResponse::AsyncResponse(AsyncResponse&& other) noexcept
    : call_(std::exchange(other.call_, nullptr)) {}
AsyncResponse& AsyncResponse::operator=(AsyncResponse other) noexcept {
  std::swap(call_, other.call_);
  return *this;
}
AsyncResponse::~AsyncResponse() {
  if (call_) call_->drop_handle();
}

const Request& AsyncResponse::request() const {
  return call_->request();
}
Worker& AsyncResponse::worker() const {
  return call_->worker();
}
bool AsyncResponse::cancelled() const {
  return call_->cancelled();
}
bool AsyncResponse::done() const {
  return call_->done();
}
bool AsyncResponse::head_sent() const {
  return call_->head_sent();
}
void AsyncResponse::on_body(std::function<bool(const BodyPiece&)> callback) {
  call_->set_body_callback(std::move(callback));
}
void AsyncResponse::resume_body() {
  call_->resume_body();
}
Response& AsyncResponse::response() {
  return call_->response();
}
void AsyncResponse::respond() {
  call_->respond();
}
bool AsyncResponse::start(int64_t content_length) {
  return call_->start(content_length);
}
IoStatus AsyncResponse::send(std::string_view bytes) {
  return call_->send(bytes);
}
void AsyncResponse::on_writable(std::function<void()> callback) {
  call_->set_writable_callback(std::move(callback));
}
void AsyncResponse::finish() {
  call_->finish();
}
void AsyncResponse::fail(int status) {
  call_->fail(status);
}
uint64_t AsyncResponse::on_cancel(std::function<void()> callback) {
  return call_->add_cancel_listener(std::move(callback));
}
void AsyncResponse::remove_cancel(uint64_t id) {
  call_->remove_cancel_listener(id);
}

// ---- Awaitables ----------------------------------------------------------------------------

bool ReadAwaitable::await_ready() {
  return call_->read_ready();
}
bool ReadAwaitable::await_suspend(std::coroutine_handle<> waiter) {
  return call_->read_suspend(waiter);
}
BodyPiece ReadAwaitable::await_resume() {
  return call_->read_take();
}

void WriteAwaitable::await_suspend(std::coroutine_handle<> waiter) {
  call_->wait_writable(waiter);
}
IoStatus WriteAwaitable::await_resume() const {
  if (sent_ == IoStatus::kCancelled) return sent_;
  // Woken because the response ended meanwhile (the client left, or another path answered).
  if (sent_ == IoStatus::kFull && call_->done()) return IoStatus::kCancelled;
  return IoStatus::kOk;
}

SleepAwaitable sleep(std::chrono::milliseconds delay) {
  return SleepAwaitable(nullptr, delay);
}

SleepAwaitable::~SleepAwaitable() {
  if (timer_) call_ ? call_->worker().cancel(timer_) : this_worker()->cancel(timer_);
  if (listener_ && call_) call_->remove_cancel_listener(listener_);
}

bool SleepAwaitable::await_ready() const {
  if (call_) return call_->cancelled();
  return this_worker() == nullptr;  // off a worker thread there is no loop to wait on
}

void SleepAwaitable::await_suspend(std::coroutine_handle<> waiter) {
  waiter_ = waiter;
  Worker& worker = call_ ? call_->worker() : *this_worker();
  timer_ = worker.after(delay_, [this] {
    timer_ = 0;
    wake(false);
  });
  if (call_) {
    listener_ = call_->add_cancel_listener([this] {
      listener_ = 0;
      wake(true);
    });
  }
}

bool SleepAwaitable::await_resume() const {
  return !cancelled_ && !(call_ && call_->cancelled());
}

void SleepAwaitable::wake(bool cancelled) {
  if (!waiter_) return;
  cancelled_ = cancelled;
  if (timer_) {
    (call_ ? call_->worker() : *this_worker()).cancel(timer_);
    timer_ = 0;
  }
  if (listener_) {
    call_->remove_cancel_listener(listener_);
    listener_ = 0;
  }
  std::exchange(waiter_, {}).resume();
}

namespace {

// Coroutine frames by size class (multiples of 64 bytes up to 4 KiB), a few of each kept per
// thread in intrusive lists (a kept frame's first bytes link to the next). A frame freed on
// another thread than its own joins that thread's lists: still right.
constexpr size_t kFrameGranule = 64;
constexpr size_t kFrameClasses = 64;
constexpr uint32_t kFramesKept = 32;

struct FreeFrame {
  FreeFrame* next;
};

struct SpareFrames {
  FreeFrame* heads[kFrameClasses] = {};
  uint32_t counts[kFrameClasses] = {};
  ~SpareFrames() {
    for (FreeFrame* frame : heads)
      while (frame) ::operator delete(std::exchange(frame, frame->next));
  }
};

SpareFrames& spare_frames() {
  thread_local SpareFrames spares;
  return spares;
}

size_t frame_class(size_t size) {
  return (size + kFrameGranule - 1) / kFrameGranule - 1;
}

}  // namespace

void* detail::RecycledFrame::operator new(size_t size) {
  const size_t c = frame_class(size);
  if (!kRecycleAllocations || c >= kFrameClasses) return ::operator new(size);
  SpareFrames& spares = spare_frames();
  FreeFrame* frame = spares.heads[c];
  if (!frame) return ::operator new((c + 1) * kFrameGranule);
  spares.heads[c] = frame->next;
  --spares.counts[c];
  return frame;
}

void detail::RecycledFrame::operator delete(void* frame, size_t size) noexcept {
  const size_t c = frame_class(size);
  if (!kRecycleAllocations || c >= kFrameClasses) {
    ::operator delete(frame);
    return;
  }
  SpareFrames& spares = spare_frames();
  if (spares.counts[c] >= kFramesKept) {
    ::operator delete(frame);
    return;
  }
  spares.heads[c] = new (frame) FreeFrame{spares.heads[c]};
  ++spares.counts[c];
}

void Task::promise_type::unhandled_exception() noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    LOG_ERROR("coroutine handler ended with an exception: %s", e.what());
  } catch (...) {
    LOG_ERROR("coroutine handler ended with an exception");
  }
}

}  // namespace peregrine

namespace peregrine::application {

handlers::Exchange* AsyncAdapter::start(const Request& request, handlers::Downstream& downstream) {
  Worker* worker = this_worker();
  if (!worker) {  // only a worker thread starts exchanges; a test harness without one gets this
    downstream.fail(500);
    return nullptr;
  }
  detail::Call* call = detail::Call::make(request, downstream, *worker);
  Ref<detail::Call> keep(call);
  handler_->handle(request, AsyncResponse(call));
  return call->done() ? nullptr : call;
}

}  // namespace peregrine::application
