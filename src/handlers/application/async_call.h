// The adapter between the public asynchronous handler API (peregrine/async.h) and the
// connection's side of an exchange (handlers/stream_handler.h). One Call is one request in
// flight: an Exchange to the connection (HTTP/1.1 or an HTTP/2 stream, whichever Downstream it
// got) and the shared state behind every copy of the application's AsyncResponse.
//
// Ownership: a reference per AsyncResponse copy, and one for the link to the connection while
// the exchange runs (the connection holds a raw Exchange pointer until the exchange ends or it
// calls on_abort()). Everything that could re-enter the connection or another coroutine (waking
// a reader, firing cancel listeners) is deferred to the worker's loop (Worker::after(0)).
#pragma once

#include <coroutine>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/spares.h"
#include "handlers/stream_handler.h"
#include "peregrine/async.h"
#include "peregrine/ref_counted.h"

namespace peregrine::detail {

// Recycled whole per thread, with the buffers its Response grew: a fresh Call and Response per
// request cost a malloc and a free per header line and body, and building and tearing down the
// object a further ~200 instructions, against a "Hello world" of ~3,000 (bench/library_cost.py).
// Under AddressSanitizer every Call is fresh memory.
class Call final : public handlers::Exchange {
 public:
  // A Call for one request, holding the link reference (see above).
  static Call* make(const Request& request, handlers::Downstream& downstream, Worker& worker);

  // Not atomic: one thread. The last release() recycles the Call.
  void add_ref() { ++refs_; }
  void release() {
    if (--refs_ == 0) recycle();
  }

  // ---- handlers::Exchange (called by the connection) ----
  bool on_body(std::string_view bytes, bool last) override;
  void on_writable() override;
  void on_abort() override;

  // ---- For AsyncResponse and its awaitables ----
  const Request& request() const { return *request_; }
  Worker& worker() const { return *worker_; }
  bool cancelled() const { return cancelled_; }
  bool done() const { return done_; }
  bool head_sent() const { return head_sent_; }
  Response& response() { return response_; }

  void add_handle() { ++handles_; }
  void drop_handle();  // the last one without an answer: 500 (or a close after the head)

  void set_body_callback(std::function<bool(const BodyPiece&)> callback);
  void resume_body();
  bool read_ready() const;
  bool read_suspend(std::coroutine_handle<> reader);
  BodyPiece read_take();

  void respond();
  bool start(int64_t content_length);
  IoStatus send(std::string_view bytes);
  void set_writable_callback(std::function<void()> callback) {
    writable_callback_ = std::move(callback);
  }
  void wait_writable(std::coroutine_handle<> writer) { writer_ = writer; }
  void finish();
  void fail(int status);

  uint64_t add_cancel_listener(std::function<void()> callback);
  void remove_cancel_listener(uint64_t id);

 private:
  Call() = default;
  ~Call() override = default;
  void recycle();
  // The exchange is over (answered, or the client is gone): no more Downstream calls; waiting
  // coroutines are woken (they see cancelled() or done()); the link reference goes.
  void end(bool cancelled);
  void deliver_pending();  // callback mode: the buffered piece to the callback
  void wake_reader();

  // Every member is set again by make() or cleared by recycle().
  uint32_t refs_ = 0;
  const Request* request_ = nullptr;
  handlers::Downstream* downstream_ = nullptr;  // null once ended
  Worker* worker_ = nullptr;
  Response response_;
  uint32_t handles_ = 0;
  bool linked_ = true;  // the connection holds us (the link reference)
  bool done_ = false;
  bool cancelled_ = false;
  bool head_sent_ = false;

  // The request body. At most one piece waits here: the connection is paused meanwhile.
  bool has_body_ = false;
  bool body_paused_ = false;  // we returned false from on_body()
  bool body_ended_ = false;   // the last piece was handed to the application
  bool has_pending_ = false;
  bool pending_last_ = false;
  bool in_read_suspend_ = false;
  bool delivery_scheduled_ = false;
  std::string pending_;
  std::string chunk_;  // the piece a coroutine is reading
  std::function<bool(const BodyPiece&)> body_callback_;
  std::coroutine_handle<> reader_;

  std::function<void()> writable_callback_;
  std::coroutine_handle<> writer_;

  std::vector<std::pair<uint64_t, std::function<void()>>> cancel_listeners_;
  uint64_t next_listener_ = 1;
};

}  // namespace peregrine::detail

namespace peregrine::application {

// The StreamHandler a route with an AsyncHandler gets (server/route_table.cc).
class AsyncAdapter final : public handlers::StreamHandler {
 public:
  explicit AsyncAdapter(std::shared_ptr<AsyncHandler> handler) : handler_(std::move(handler)) {}
  handlers::Exchange* start(const Request& request, handlers::Downstream& downstream) override;

 private:
  std::shared_ptr<AsyncHandler> handler_;
};

}  // namespace peregrine::application
