// One HTTP/2 client connection (RFC 9113): h2c with prior knowledge on a listener with
// `http2 = true`, and ALPN "h2". Our http2::session::Session does the framing, HPACK and flow
// control; this class feeds it bytes, turns its streams into peregrine::Requests routed through
// the same RouteTable as HTTP/1, and sends what it produces, batched: all the frames of one
// event leave in one write. Each stream is a handlers::Downstream, so every handler, synchronous
// or streamed (FastCGI, proxy), works unchanged. One worker thread owns the connection and its
// session: no locks.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "access/check.h"
#include "event/poller.h"
#include "event/timer_list.h"
#include "http2/session/session.h"
#include "peregrine/response.h"
#include "server/client_peer.h"
#include "tls/stream.h"

namespace peregrine::server {

class Worker;
struct ListenerOptions;
class Http2Stream;
struct Http2Callbacks;

// The defaults and abuse budgets (docs/http2.md).
struct Http2Limits {
  static constexpr uint32_t kMaxConcurrentStreams = 128;  // REFUSED_STREAM beyond
  static constexpr int32_t kStreamWindow = 65535;         // per stream, opened as bytes are taken
  static constexpr int32_t kConnectionWindow = 1 << 20;
  // Client RST_STREAMs of streams we had started handling (Rapid Reset, CVE-2023-44487), and
  // RST_STREAMs we had to send for the client's errors (MadeYouReset, CVE-2025-8671): each budget
  // grows by one for every two completed responses, so a long-lived browser connection that
  // cancels now and then never reaches it.
  static constexpr uint32_t kResetBudget = 100;
  static constexpr uint32_t kErrorBudget = 100;
  // A header block (on the wire or decoded) past this multiple of max_header_bytes ends the
  // connection (CONTINUATION flood, HPACK bomb); up to it, the stream gets 431.
  static constexpr uint32_t kHeaderAbuseFactor = 4;
};

class Http2Connection final : public event::Pollable, public event::TimerOwner {
 public:
  // `tls`: the session of a TLS connection whose ALPN chose "h2" (null for h2c).
  Http2Connection(Worker& worker, int fd, const sockaddr* peer, socklen_t peer_len,
                  const ListenerOptions& listener, std::unique_ptr<tls::Stream> tls);
  ~Http2Connection();
  Http2Connection(const Http2Connection&) = delete;
  Http2Connection& operator=(const Http2Connection&) = delete;

  // `already_read`: what the caller read from the socket before handing it over, starting with
  // the client preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (may be empty or partial).
  void start(std::string_view already_read);
  // The socket's peer, when a PROXY protocol header gave the connection another client.
  void set_socket_peer(const sockaddr* address, socklen_t length);
  void on_ready(uint32_t readiness) override;
  void on_timeout() override;
  // Graceful stop: GOAWAY, in-flight streams finish, then the close. `notice`: a GOAWAY that
  // names no last stream, so that streams already on their way are still served; a later
  // drain() sends the final one (a binary upgrade: Worker::handing_over).
  void drain(bool notice = false);
  void close_now();
  bool closed() const { return closed_; }
  bool busy() const { return !streams_.empty(); }  // metrics: streams open

  event::TimerNode timer;
  Http2Connection* prev = nullptr;  // worker's list of live HTTP/2 connections
  Http2Connection* next = nullptr;

 private:
  friend class Http2Stream;
  friend struct Http2Callbacks;

  // All socket I/O goes through these two, with recv/send semantics (>0 bytes, 0 peer closed,
  // -1 with errno): the TLS stream's read/write when there is one, else the socket's.
  ssize_t read_some(char* buffer, size_t size);
  ssize_t write_some(const char* data, size_t size);

  void on_readable();
  bool feed(const char* data, size_t size);
  void send_frames();
  bool write_pending();
  void settle();
  void after_stream_call();
  void update_timer();
  void notify_writable_streams();
  void reset_failed_streams();

  // ---- Streams ----
  Http2Stream* open_stream(int32_t id);
  void retire(Http2Stream& s);
  void on_request_head(Http2Stream& s, bool end_stream);
  void on_request_end(Http2Stream& s);
  void start_handling(Http2Stream& s);
  void resume_delayed(Http2Stream& s);
  void on_data(Http2Stream& s, std::string_view bytes);
  void deliver(Http2Stream& s, std::string_view bytes, bool last);
  void answer(Http2Stream& s);
  void respond_status(Http2Stream& s, int status);
  void respond_complete(Http2Stream& s, Response& response);
  bool submit_head(Http2Stream& s, const Response& response, int64_t content_length,
                   bool with_body);
  void consume(int32_t stream_id, size_t bytes);
  void detach_streams();
  void linger();
  const sockaddr* local_address();

  Worker& worker_;
  const ListenerOptions& listener_;
  int fd_;
  std::unique_ptr<tls::Stream> tls_;
  // Counted in per-address connection limits (by its first stream); null when none applies.
  std::unique_ptr<access::ConnectionCount> counted_;
  bool first_stream_seen_ = false;
  std::unique_ptr<Http2Callbacks> events_;
  std::unique_ptr<http2::session::Session> session_;
  // Live streams, in no order; each knows its slot (each session Stream's `user` points at one).
  // An array, not a linked list: update_timer reads every stream after each event, and streams
  // are large and cold, so their cache misses must overlap instead of following one another.
  std::vector<Http2Stream*> streams_;
  std::string pending_;  // what the socket has not taken yet
  size_t pending_at_ = 0;
  bool closed_ = false;
  bool in_event_ = false;  // our own event handling is on the stack: it sends at its end
  bool sending_ = false;
  bool send_again_ = false;
  bool read_blocked_ = false;
  bool hangup_seen_ = false;
  bool peer_closed_ = false;
  bool draining_ = false;
  bool noticed_ = false;        // drain(true): the first GOAWAY is out
  uint32_t streams_begun_ = 0;  // against limits.max_requests_per_connection
  bool calmed_ = false;         // a connection error: the session's GOAWAY is queued
  bool lingering_ = false;      // GOAWAY out, input dropped until the client closes
  bool shut_ = false;
  bool progress_ = false;          // bytes moved since the timer was last armed
  bool writable_waiting_ = false;  // some stream said kFull
  bool read_failed_ = false;       // a body file could not be read: its stream is to be reset
  uint64_t completed_ = 0;         // responses sent to the end
  union {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } peer_{};  // the client: the socket's peer, or what a PROXY protocol header said
  socklen_t peer_len_ = 0;
  PeerAddress socket_peer_{};  // the socket's own peer once a PROXY header replaced peer_
  socklen_t socket_peer_len_ = 0;
  uint64_t serial_ = 0;  // $connection (HTTP/2 connections count apart from HTTP/1 ones)
  sockaddr_storage local_{};
  socklen_t local_len_ = 0;
};

}  // namespace peregrine::server
