// An asynchronous HTTP/1.1 client for handlers: requests to other servers (http:// and https://)
// on the worker's own loop, with per-worker keep-alive pools, timeouts and a bounded body.
//
// Coroutines (inside a peregrine::Task):
//   peregrine::HttpClient client;  // options: timeouts, body limit, pool, TLS verification
//   peregrine::HttpResponse r = co_await client.get("http://127.0.0.1:9000/users/7", res);
//   if (!r.ok()) { res.fail(502); co_return; }           // r.error says why (timeout...)
//   res.response().set_body(r.body); res.respond();
//
// Callbacks:
//   client.request({"POST", url, {{"Content-Type", "application/json"}}, body},
//                  [res](peregrine::HttpResponse& r) mutable { ... }, &res);
//
// Streaming the response (any size, with back-pressure: the server is read no faster than
// read() is called):
//   peregrine::HttpStream stream = client.open({"GET", url, {}, {}}, res);
//   peregrine::HttpResponse head = co_await stream.head();   // status and headers, no body
//   for (;;) {
//     peregrine::HttpBodyPiece piece = co_await stream.read();
//     if (piece.error != peregrine::HttpError::kNone) break;  // broke off
//     ... piece.bytes ...
//     if (piece.last) break;
//   }
//
// Rules:
//  - Calls are made on a worker thread, while the server runs (elsewhere: kNoWorker). The call
//    starts at once; co_await (or the callback) gets its result, always from the worker's loop,
//    never from inside the call that started it. Several calls may be in flight at once:
//    start them, then co_await each.
//  - Failures are results, not exceptions: HttpResponse::error. Any status the server sent
//    (404, 500...) is a response (error kNone).
//  - Passing the handler's AsyncResponse ties the call to that client: when it goes away the
//    call is aborted (its connection closed) and resolves at once with kCancelled.
//  - Connections are kept per worker and per origin (scheme, host, port and the options that
//    shape a connection) and reused by later calls with equal options, whichever HttpClient
//    object makes them. Host names are resolved once per worker and origin, when first used
//    (getaddrinfo: it blocks the worker for that lookup; IP addresses and "localhost" do not).
//  - request() buffers the body whole, up to max_body_bytes (kTooLarge beyond, the connection is
//    closed). Hop-by-hop and framing fields (Connection, Transfer-Encoding, Content-Length,
//    Keep-Alive...) and Date/Server are not in `headers`: body.size() is the length.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peregrine/async.h"

namespace peregrine {

enum class HttpError : uint8_t {
  kNone,            // a response came, whatever its status
  kInvalidRequest,  // a malformed URL, method or header: nothing was sent
  kFailed,          // connect refused or failed, TLS failure (verification), reset, bad response
  kTimeout,         // connect_timeout, read_timeout or the call's timeout
  kBusy,            // max_connections in use, and 1024 calls wait already or this one 30 s
  kTooLarge,        // the response body is over max_body_bytes
  kCancelled,       // the AsyncResponse's client went away, or the worker stops
  kNoWorker,        // not called on a worker thread while the server runs
};
std::string_view http_error_name(HttpError error);  // "timeout", "failed"...

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{5'000};  // TCP connect and TLS handshake
  std::chrono::milliseconds read_timeout{30'000};    // between two reads (and two writes)
  std::chrono::milliseconds timeout{0};              // the whole call, queue included; 0: none
  uint64_t max_body_bytes = 8 << 20;                 // the response body
  // Idle keep-alive connections kept per worker and origin (0: one connection per call), and
  // how long one may idle.
  uint32_t keepalive = 32;
  std::chrono::milliseconds keepalive_timeout{60'000};
  // Calls in flight per worker and origin (0: no limit); more wait for a free one, in order.
  uint32_t max_connections = 0;
  // https: verify the server's certificate chain and name (against ca_file, or the system's
  // store when empty). Turning it off makes the call open to anyone on the path.
  bool tls_verify = true;
  std::string ca_file;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;  // http://host[:port]/path?query or https://...
  std::vector<std::pair<std::string, std::string>> headers;  // Host is set from the URL
  std::string body;  // sent with a Content-Length (also 0 for POST, PUT and PATCH)
};

struct HttpResponse {
  HttpError error = HttpError::kNone;
  int status = 0;  // 0 unless error is kNone
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string error_text;  // with an error: what went wrong, for a log line

  bool ok() const { return error == HttpError::kNone; }
  // The first header with this name (case-insensitive).
  std::optional<std::string_view> header(std::string_view name) const;
};

// A piece of a streamed response body: `bytes` is valid until the next read().
struct HttpBodyPiece {
  std::string_view bytes;
  bool last = false;                   // the body is complete (bytes may be empty)
  HttpError error = HttpError::kNone;  // it broke off (kFailed, kTimeout, kCancelled...): no more
};

namespace detail {
class ClientCall;  // one call in flight (src/client/http_client.cc)
}

// A call whose response is read as it arrives (HttpClient::open). Destroying it before the body
// ended aborts the call. max_body_bytes does not apply: memory stays bounded by back-pressure.
class HttpStream {
 public:
  explicit HttpStream(detail::ClientCall* call) : call_(call) {}
  HttpStream(HttpStream&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;
  HttpStream& operator=(HttpStream&&) = delete;
  ~HttpStream();

  // co_await head() → the status and headers (body empty), or the error.
  class HeadAwaitable {
   public:
    explicit HeadAwaitable(detail::ClientCall* call) : call_(call) {}
    bool await_ready() const;
    void await_suspend(std::coroutine_handle<> waiter);
    HttpResponse await_resume() const;

   private:
    detail::ClientCall* call_;
  };
  // co_await read() → the next piece of the body (after head()).
  class ReadAwaitable {
   public:
    explicit ReadAwaitable(detail::ClientCall* call) : call_(call) {}
    bool await_ready() const;
    void await_suspend(std::coroutine_handle<> waiter);
    HttpBodyPiece await_resume();

   private:
    detail::ClientCall* call_;
  };
  HeadAwaitable head() { return HeadAwaitable(call_); }
  ReadAwaitable read() { return ReadAwaitable(call_); }

 private:
  detail::ClientCall* call_;
};

// co_await → HttpResponse. Destroying it before the call ended aborts the call.
class HttpAwaitable {
 public:
  explicit HttpAwaitable(detail::ClientCall* call) : call_(call) {}
  HttpAwaitable(HttpAwaitable&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  HttpAwaitable(const HttpAwaitable&) = delete;
  HttpAwaitable& operator=(const HttpAwaitable&) = delete;
  HttpAwaitable& operator=(HttpAwaitable&&) = delete;
  ~HttpAwaitable();
  bool await_ready() const;
  void await_suspend(std::coroutine_handle<> waiter);
  HttpResponse await_resume();

 private:
  detail::ClientCall* call_;
};

class HttpClient {
 public:
  HttpClient() = default;
  explicit HttpClient(HttpClientOptions options) : options_(std::move(options)) {}
  const HttpClientOptions& options() const { return options_; }

  // ---- Coroutines ----
  HttpAwaitable request(HttpRequest request) { return start(std::move(request), nullptr); }
  // Aborted when `for_client`'s client goes away.
  HttpAwaitable request(HttpRequest request, const AsyncResponse& for_client) {
    return start(std::move(request), &for_client);
  }
  HttpAwaitable get(std::string url) { return request({"GET", std::move(url), {}, {}}); }
  HttpAwaitable get(std::string url, const AsyncResponse& for_client) {
    return request({"GET", std::move(url), {}, {}}, for_client);
  }

  // ---- Streaming: the head, then the body piece by piece ----
  HttpStream open(HttpRequest request) { return open_stream(std::move(request), nullptr); }
  HttpStream open(HttpRequest request, const AsyncResponse& for_client) {
    return open_stream(std::move(request), &for_client);
  }

  // ---- Callbacks: `done` runs once, from the worker's loop ----
  void request(HttpRequest request, std::function<void(HttpResponse&)> done,
               const AsyncResponse* for_client = nullptr);

 private:
  HttpAwaitable start(HttpRequest request, const AsyncResponse* for_client);
  HttpStream open_stream(HttpRequest request, const AsyncResponse* for_client);
  HttpClientOptions options_;
};

}  // namespace peregrine
