// Asynchronous application handlers: answer later, stream the request and response bodies, learn
// when the client goes away. Two styles on one interface, AsyncResponse:
//
// Callbacks:
//   server.route_async("/hello", [](const peregrine::Request&, peregrine::AsyncResponse res) {
//     peregrine::this_worker()->after(std::chrono::milliseconds(50), [res]() mutable {
//       res.response().set_content_type("text/plain");
//       res.response().set_body("later\n");
//       res.respond();  // a no-op when the client is gone by now
//     });
//   });
//
// C++20 coroutines (a function returning peregrine::Task):
//   server.route_async("/count", [](const peregrine::Request&,
//                                   peregrine::AsyncResponse res) -> peregrine::Task {
//     for (int i = 0; i < 10; ++i) {
//       if (!co_await res.sleep(std::chrono::seconds(1))) co_return;  // client gone
//       if (co_await res.write(std::to_string(i) + "\n") != peregrine::IoStatus::kOk) co_return;
//     }
//     res.finish();
//   });
//
// Rules:
//  - Everything runs on the worker thread that received the request: the handler, its callbacks,
//    its coroutine's resumptions. An AsyncResponse must not be used from another thread (post()
//    back to its worker, see peregrine/worker.h).
//  - The Request (and every view in it) is valid until the response ends (respond(), finish(),
//    fail()) or the client goes away (cancelled()); copy what you need longer.
//  - Cancellation is a result, not an exception: when the client disconnects (or a write finds
//    it gone) cancelled() turns true, the on_cancel() listeners run once, a pending co_await
//    resumes at once with its cancelled result (read: BodyPiece::cancelled; write: kCancelled;
//    sleep: false), and every later response call is a no-op.
//  - When the last copy of an AsyncResponse goes away without an answer, the client gets a 500
//    (or, after the head, a closed connection) and the error log says so.
//  - A coroutine lambda's captures live in the handler object, which a reload may free while the
//    coroutine waits: take what a coroutine needs as parameters (they live in its frame).
//  - A head with status 101 turns the exchange into a tunnel: the body calls then carry the raw
//    bytes of the connection both ways (the WebSocket endpoints build on this).
//
// Awaiting other I/O (a client, a database): an awaitable registers its work on this worker's
// loop, resumes the coroutine from there, and listens with on_cancel() to abort and resume with a
// cancelled result. SleepAwaitable below is the model.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "peregrine/request.h"
#include "peregrine/response.h"
#include "peregrine/worker.h"

namespace peregrine {

enum class IoStatus : uint8_t {
  kOk,         // taken
  kFull,       // (send() only) taken, but the client is slow: wait for on_writable()
  kCancelled,  // the client is gone; nothing was sent
};

// A piece of the request body. `bytes` stays valid until the next read (coroutines) or until the
// callback returns (on_body).
struct BodyPiece {
  std::string_view bytes;
  bool last = false;       // the body is complete (bytes may be empty)
  bool cancelled = false;  // the client went away: no more pieces
};

class AsyncResponse;

namespace detail {
class Call;  // the request in flight (src/handlers/application/async_call.h)
}

// co_await res.read() → BodyPiece.
class ReadAwaitable {
 public:
  explicit ReadAwaitable(detail::Call* call) : call_(call) {}
  bool await_ready();
  bool await_suspend(std::coroutine_handle<> waiter);
  BodyPiece await_resume();

 private:
  detail::Call* call_;  // kept alive by the AsyncResponse the coroutine holds
};

// co_await res.write(bytes) → IoStatus::kOk once the client took the bytes or there is room for
// more, kCancelled when it is gone.
class WriteAwaitable {
 public:
  WriteAwaitable(detail::Call* call, IoStatus sent) : call_(call), sent_(sent) {}
  bool await_ready() const { return sent_ != IoStatus::kFull; }
  void await_suspend(std::coroutine_handle<> waiter);
  IoStatus await_resume() const;

 private:
  detail::Call* call_;
  IoStatus sent_;
};

// co_await res.sleep(d) → true when `d` elapsed, false when the client went away first.
// co_await peregrine::sleep(d) (no response attached) → always true.
class SleepAwaitable {
 public:
  SleepAwaitable(detail::Call* call, std::chrono::milliseconds delay)
      : call_(call), delay_(delay) {}
  SleepAwaitable(const SleepAwaitable&) = delete;
  SleepAwaitable& operator=(const SleepAwaitable&) = delete;
  ~SleepAwaitable();
  bool await_ready() const;
  void await_suspend(std::coroutine_handle<> waiter);
  bool await_resume() const;

 private:
  void wake(bool cancelled);
  detail::Call* call_;  // null: a plain sleep
  std::chrono::milliseconds delay_;
  std::coroutine_handle<> waiter_;
  uint64_t timer_ = 0;
  uint64_t listener_ = 0;
  bool cancelled_ = false;
};
SleepAwaitable sleep(std::chrono::milliseconds delay);

// The handle on one request in flight. Copies share the request; cheap to copy (a reference
// count, not atomic: one thread).
class AsyncResponse {
 public:
  explicit AsyncResponse(detail::Call* call);
  AsyncResponse(const AsyncResponse& other);
  AsyncResponse(AsyncResponse&& other) noexcept;
  AsyncResponse& operator=(AsyncResponse other) noexcept;
  ~AsyncResponse();

  const Request& request() const;  // see the rules above for how long
  Worker& worker() const;
  bool cancelled() const;  // the client went away
  bool done() const;       // respond(), finish() or fail() was called, or cancelled()
  bool head_sent() const;

  // ---- The request body (none: the first piece is empty and last) ----
  // Callback style: each piece as it arrives; return false to pause until resume_body().
  void on_body(std::function<bool(const BodyPiece&)> callback);
  void resume_body();
  // Coroutine style: co_await read() for the next piece. The body is not read from the client
  // ahead of the handler by more than one piece (back-pressure on the uploader).
  ReadAwaitable read() { return ReadAwaitable(call_); }

  // ---- The response ----
  // Status and headers (and, for respond(), the body) of the answer.
  Response& response();
  // Sends response() complete, Content-Length set (after start(): the same as finish()). Ends
  // the exchange.
  void respond();
  // Sends response()'s head now (its body, if any, goes with it); `content_length` < 0: unknown
  // (chunked to HTTP/1.1, DATA frames to HTTP/2). False when the client is gone.
  bool start(int64_t content_length = -1);
  // A piece of the body (the head goes first when start() was not called). kFull: taken, but
  // stop writing until on_writable() runs.
  IoStatus send(std::string_view bytes);
  void on_writable(std::function<void()> callback);
  // Coroutine style: send(), then wait for room if the client is slow.
  WriteAwaitable write(std::string_view bytes) { return WriteAwaitable(call_, send(bytes)); }
  void finish();  // the body is complete. Ends the exchange.
  // Gives up: answers `status` (with the site's error page) before the head, closes the
  // connection after it. Ends the exchange.
  void fail(int status);

  // ---- Cancellation ----
  // `callback` runs once when the client goes away before the response ended; at once if it
  // already has. Returns an id for remove_cancel().
  uint64_t on_cancel(std::function<void()> callback);
  void remove_cancel(uint64_t id);
  SleepAwaitable sleep(std::chrono::milliseconds delay) { return SleepAwaitable(call_, delay); }

 private:
  detail::Call* call_;
};

// The return type of a coroutine handler: it starts at once, runs until its first suspension,
// and frees itself when it ends. Nothing awaits it; the AsyncResponse it holds is its result.
namespace detail {
// Coroutine frames come from a per-thread free list: a malloc and a free per request were a
// tenth of a coroutine "Hello world".
struct RecycledFrame {
  static void* operator new(size_t size);
  static void operator delete(void* frame, size_t size) noexcept;
};
}  // namespace detail

class Task {
 public:
  struct promise_type : detail::RecycledFrame {
    Task get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept;  // logged; the response then gets its 500
  };
};

// A coroutine that hands a result to the coroutine that awaits it, so that a handler's steps can
// be functions of their own:
//
//   peregrine::Async<std::string> user_name(peregrine::HttpClient& client, int id,
//                                           peregrine::AsyncResponse res) {
//     peregrine::HttpResponse r = co_await client.get(url_of(id), res);
//     co_return r.ok() ? r.body : std::string();
//   }
//   ... std::string name = co_await user_name(client, 7, res);   // inside a Task or an Async
//
// It starts when awaited (not before), resumes its awaiter when it ends, and passes on an
// exception it lets escape. Await it once, where it was made: on the same worker thread.
template <class T = void>
class [[nodiscard]] Async {
 public:
  struct promise_type;
  using Handle = std::coroutine_handle<promise_type>;

  struct PromiseBase : detail::RecycledFrame {
    std::coroutine_handle<> awaiter;
    std::exception_ptr exception;
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(Handle self) noexcept {
        return self.promise().awaiter ? self.promise().awaiter : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { exception = std::current_exception(); }
  };
  struct promise_type : PromiseBase {
    std::optional<T> value;
    Async get_return_object() noexcept { return Async(Handle::from_promise(*this)); }
    template <class U>
    void return_value(U&& result) {
      value.emplace(std::forward<U>(result));
    }
  };

  Async(Async&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Async& operator=(Async&&) = delete;
  ~Async() {
    if (handle_) handle_.destroy();
  }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) noexcept {
    handle_.promise().awaiter = awaiter;
    return handle_;  // start it; it resumes `awaiter` when it ends
  }
  T await_resume() {
    promise_type& promise = handle_.promise();
    if (promise.exception) std::rethrow_exception(promise.exception);
    return std::move(*promise.value);
  }

 private:
  explicit Async(Handle handle) : handle_(handle) {}
  Handle handle_;
};

template <>
struct Async<void>::promise_type : Async<void>::PromiseBase {
  Async get_return_object() noexcept { return Async(Handle::from_promise(*this)); }
  void return_void() noexcept {}
};

template <>
inline void Async<void>::await_resume() {
  if (handle_.promise().exception) std::rethrow_exception(handle_.promise().exception);
}

class AsyncHandler {
 public:
  virtual ~AsyncHandler() = default;
  // Starts answering `request`; may return at once and answer later through `response`.
  virtual void handle(const Request& request, AsyncResponse response) = 0;
};

}  // namespace peregrine
