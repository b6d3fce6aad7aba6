// One client connection: reads bytes, runs them through the HTTP/1 parser, routes each request
// to its handler, serializes the responses and writes them, in order, with back-pressure.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

#include "access/check.h"
#include "event/poller.h"
#include "event/timer_list.h"
#include "handlers/stream_handler.h"
#include "http/header_edits.h"
#include "http/http1/parser.h"
#include "metrics/metrics.h"
#include "peregrine/handler.h"
#include "peregrine/ref_counted.h"
#include "peregrine/response.h"
#include "server/client_peer.h"
#include "server/output_queue.h"
#include "tls/stream.h"

namespace peregrine::server {

class Worker;
class RouteTable;
struct ListenerOptions;
struct Selection;
struct SiteRuntime;
struct InFlight;

class Connection final : public event::Pollable,
                         public event::TimerOwner,
                         public handlers::Downstream {
 public:
  Connection(Worker& worker, int fd, const sockaddr* peer, socklen_t peer_len,
             const ListenerOptions& listener);
  ~Connection();

  // Right after accept: the request is usually already there (TCP_DEFER_ACCEPT), so read at once
  // and only register with the poller if the connection outlives its first response.
  void start();
  void on_ready(uint32_t readiness) override;
  void on_received(const char* bytes, size_t length) override;
  void on_sent(bool ok) override;
  void on_timeout() override;
  // Graceful stop: close now if idle, otherwise after the response in progress. Handing over
  // to a new binary (Worker::handing_over), a response already sent as keep-alive is honoured:
  // the next request gets Connection: close, and an idle connection is closed only after
  // Worker::kHandOverIdleGrace of silence (close_when_idle).
  void drain();
  void close_now();
  void close_when_idle();
  bool closed() const { return state_ == State::kClosed; }
  // Metrics (sampled by the worker once a second): what the connection waits for.
  enum class Phase : uint8_t { kReading, kWriting, kIdle };
  Phase phase() const {
    if (pending_ || state_ == State::kExchange || state_ == State::kLinger) return Phase::kWriting;
    if (state_ == State::kHead && start_ == end_) return Phase::kIdle;
    return Phase::kReading;
  }

  // ---- Downstream: what an asynchronous handler's exchange calls (handlers/stream_handler.h) ----
  void resume_body() override;
  void respond(Response& response) override;
  bool send_head(Response& head, int64_t content_length) override;
  handlers::Downstream::Sent send_body(std::string_view bytes) override;
  handlers::Downstream::Sent hold_if_queued() override;
  void finish() override;
  void fail(int status) override;
  bool head_sent() const override;

  event::TimerNode timer;
  Connection* prev = nullptr;  // worker's list of live connections
  Connection* next = nullptr;

 private:
  enum class State : uint8_t {
    kHead,      // waiting for / parsing a request head
    kBody,      // reading a request body (InFlight): kept for a handler that wants it, else dropped
    kExchange,  // an asynchronous handler owns the request (InFlight); the body streams to it
    kLinger,    // response sent, write side shut: draining what the client still sends
    kDelayed,   // a rate limit holds the request (InFlight) until the timer fires
    kClosed,
  };
  // How a response's body is delimited on the wire.
  enum class Framing : uint8_t { kNone, kLength, kChunked, kClose };

  void on_readable();
  // The client's bytes: recv(), decrypted ones on a TLS connection, or those the poller handed
  // over (same contract).
  ssize_t receive(char* buffer, size_t length) {
    ssize_t n = tls_         ? tls_->read(buffer, length)
                : receiving_ ? take_received(buffer, length)
                             : ::recv(fd_, buffer, length, 0);
    if (n > 0) metrics::local().bytes_received[0].add(static_cast<uint64_t>(n));
    return n;
  }
  ssize_t take_received(char* buffer, size_t length);
  void resume_receiving();
  // ---- TLS (listener_.tls): the handshake comes before the first request ----
  bool start_tls();
  bool continue_handshake();
  void process();
  bool process_head();
  void handle_request(size_t head_length);
  void hand_over_http2();
  void answer(Request& request, const Selection& selection);

  // ---- The request body (kBody and kExchange) ----
  InFlight& hold_request(const Request& request, const Selection& selection);
  InFlight* flight();
  bool invite_body(const Request& request);
  bool read_body();
  void read_tunnel();
  bool deliver(InFlight* f, std::string_view bytes, bool last);
  void reject_body(int status);

  // ---- Asynchronous handlers ----
  void start_exchange(Request& request, const Selection& selection);
  void feed_exchange();
  void on_exchange_ready(uint32_t readiness);
  void end_exchange();
  void continue_after_exchange();
  void queue_scratch_output();
  bool write_for_exchange();
  void abort_exchange();
  void log_streamed(const InFlight& f);
  void log_access(SiteRuntime& site, const Request& request, int status, uint64_t body_bytes,
                  const Response* response = nullptr);
  // Metrics: one count per request, where its access-log line is made (log on or off).
  void count_request(const Request& request, int status, uint64_t body_bytes);
  void drop_flight();

  // ---- The response ----
  void respond_error(int status, const Request* request, SiteRuntime* site);
  // `headers`: the response header rules that apply (Selection::headers), or null.
  void send_response(const Request& request, Response& response, SiteRuntime* site,
                     const http::HeaderEdits* headers);
  Framing write_response(const Request& request, const Response& response, int64_t content_length,
                         const SiteRuntime* site, const http::HeaderEdits* headers);
  bool keep_alive_allowed(const Request& request, const Response& response) const;

  void flush();
  void arm_send_timer();
  void become_idle_or_wait();
  void finish_closing();
  bool ensure_registered();
  void release_buffer();
  void set_timer(event::TimerList& list);
  void read_proxy_header();
  void set_socket_peer(Request& request) const;

  Worker& worker_;
  const ListenerOptions& listener_;  // the worker's Listener outlives its connections
  int fd_;
  uint32_t requests_ = 0;
  State state_ = State::kHead;
  bool registered_ = false;
  bool keep_alive_ = true;        // false once a response said Connection: close
  bool peer_closed_ = false;      // read returned 0
  bool hangup_seen_ = false;      // the poller reported the client's FIN (or an error)
  bool read_blocked_ = false;     // readable data left unread while output was blocked
  bool linger_on_close_ = false;  // closing on an error: the client may still be sending
  bool in_process_ = false;       // process() is on the stack: it continues after an exchange
  // A proxy_protocol listener's header is not in yet.
  bool awaiting_proxy_header_ = false;
  // Registered with event::kReceive: the poller reads the socket and hands the bytes over
  // (on_received); the connection never calls recv(2) itself then, or bytes could pass each other.
  bool receiving_ = false;
  bool receive_ended_ = false;   // the poller said the stream ended: reads return 0 from now on
  bool receive_paused_ = false;  // bytes were kept while reading was blocked: receiving stopped
  // A Poller::send is in flight (receiving_ connections): pending_ holds what comes after it.
  bool sending_ = false;
  // During on_received: its bytes not yet taken (on its stack: one pointer here, as 10,000 idle
  // connections pay for every byte of this object).
  std::string_view* inbox_ = nullptr;
  char* buffer_ = nullptr;
  uint32_t start_ = 0;                    // first unconsumed byte
  uint32_t end_ = 0;                      // one past the last received byte
  std::unique_ptr<OutputQueue> pending_;  // what the socket has not taken yet
  http1::RequestParser parser_;
  std::unique_ptr<InFlight> flight_;  // kBody, kExchange
  union {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } peer_{};  // the client: the socket's peer, or what a PROXY protocol header said
  socklen_t peer_len_ = 0;
  uint64_t serial_ = 0;  // $connection
  // An idle connection's memory is this object (issue 15: 10,000 idle connections in under
  // 3 MB), so what only some connections or only a request in progress need lives apart:
  //  - Extras, made on first use: the socket's own peer behind a PROXY protocol header, our own
  //    address for CGI parameters, the route table a TLS handshake's callbacks read;
  //  - RequestScope, made when a request head is complete (or an error is answered) and dropped
  //    when the connection goes idle, from a per-thread free list.
  struct Extras;
  struct RequestScope;
  Extras& extras();
  RequestScope& scope();
  std::unique_ptr<Extras> extras_;
  std::unique_ptr<RequestScope> scope_;
  std::unique_ptr<tls::Stream> tls_;  // null on a plain connection
  // Counted in per-address connection limits (by its first request); null when none applies.
  std::unique_ptr<access::ConnectionCount> counted_;
  bool refuse_connection(Request& request, const Selection& selection);
  void dispatch(Request& request, const Selection& selection);
  void delay_request(const Request& request, const Selection& selection);
  void resume_delayed();
};

}  // namespace peregrine::server
