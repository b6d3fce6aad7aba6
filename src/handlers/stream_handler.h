// The boundary between a client connection and an asynchronous handler. The gateways (FastCGI,
// AJP, the reverse proxy), the library's asynchronous handlers and WebSocket endpoints answer a
// request later, from the worker's event loop, while the connection waits. An Exchange is one
// such request in flight; Downstream is the client connection as the exchange sees it. server/
// implements Downstream (server/connection.cc for HTTP/1.1, server/http2_connection.cc's
// Http2Stream for HTTP/2); handlers/ implement StreamHandler and Exchange. Nothing here says
// which protocol the client speaks, so a handler is written once for both.
//
// Lifetime rules (no reference counting, no re-entrancy surprises):
//  - The connection starts the exchange with StreamHandler::start() once the request head is
//    parsed. The Request (and every view in it) stays valid until the exchange ends.
//  - The exchange ends itself by calling Downstream::respond(), finish() or fail(): after that it
//    must not touch the Downstream again, and it frees itself (or goes back to a pool).
//  - When the client goes away first (closed, reset, timed out), the connection calls
//    Exchange::on_abort() once, from its own event handling; the exchange then frees itself and
//    never touches the Downstream again.
//  - Downstream methods never call the exchange back synchronously, except resume_body(), which
//    may deliver buffered body bytes through on_body() before it returns; call it last.
//  - All calls happen on the worker thread that owns the connection.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "peregrine/request.h"
#include "peregrine/response.h"

namespace peregrine::handlers {

class Downstream {
 public:
  // ---- The request body (Content-Length or chunked, already de-chunked) ----
  // Asks for more body bytes after on_body() returned false.
  virtual void resume_body() = 0;

  // ---- The response ----
  // A complete response in one go (buffered bodies, errors): the site's error page replaces an
  // empty 4xx/5xx body, Content-Length is set, the access log is written. Ends the exchange.
  virtual void respond(Response& response) = 0;

  // A streamed response: the head now, the body in pieces. `content_length` < 0 means unknown:
  // chunked to HTTP/1.1 clients, close-delimited to HTTP/1.0 ones. A 101 answer turns the
  // connection into a tunnel: from then on on_body() receives raw client bytes and send_body()
  // writes raw bytes. Returns false when the client is gone: the exchange must end itself
  // (release its upstream resources) without another Downstream call.
  virtual bool send_head(Response& head, int64_t content_length) = 0;
  enum class Sent : uint8_t {
    kMore,  // keep going
    kFull,  // the client is slow: stop reading the upstream until on_writable()
    kGone,  // the client is gone: end the exchange without another Downstream call
  };
  virtual Sent send_body(std::string_view bytes) = 0;
  // Does the client still hold bytes of this response it has not written out (queued in the
  // connection; on HTTP/2, 16 KiB or more waiting for the stream's window)? kFull: yes, and
  // on_writable() follows once they are out, as after a send_body() that said kFull; kMore: no;
  // kGone: as for send_body(). A decorator whose output is much smaller than its input (the
  // compressing one) asks this to pace its input: its output alone rarely reaches kFull.
  virtual Sent hold_if_queued() { return Sent::kMore; }
  // The body is complete (for chunked: writes the last chunk). Ends the exchange.
  virtual void finish() = 0;

  // Gives up. Before send_head: answers `status` (502, 503, 504...) with the site's error page.
  // After it: the response cannot be completed, so the connection is closed. Ends the exchange.
  virtual void fail(int status) = 0;

  // Already sent (or queued) a part of the response? Retries are only safe before.
  virtual bool head_sent() const = 0;

 protected:
  ~Downstream() = default;
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  // Request body bytes as they arrive; `last` marks the end (bytes may then be empty). Return
  // false to pause: no more bytes until the exchange calls Downstream::resume_body(). A request
  // without a body gets no call. In a tunnel, raw client bytes; `last` means the client closed
  // its sending side.
  virtual bool on_body(std::string_view bytes, bool last) = 0;
  // The client took everything queued after a send_body() that returned kFull.
  virtual void on_writable() = 0;
  // The client is gone. Free everything; do not touch the Downstream.
  virtual void on_abort() = 0;
};

// Implemented by handlers that answer asynchronously. `request` stays valid until the exchange
// ends. May end the exchange at once (respond()/fail()) and return null.
class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  virtual Exchange* start(const Request& request, Downstream& downstream) = 0;
};

// What a handler gets from the worker that instantiates it: its loop, its timers, its clock.
struct WorkerEnv {
  event::Poller& poller;
  event::TimerSet& timers;
  const Clock& clock;
  int workers;
  // True once the worker stops gracefully: an exchange with no natural end (the admin's log
  // tail) finishes itself instead of holding the stop for shutdown_timeout. Null: never.
  const bool* draining = nullptr;
};

}  // namespace peregrine::handlers
