// One request in flight to an upstream group, whatever the protocol: the lifecycle the FastCGI
// gateway and the reverse proxy share, so that their policies cannot drift apart again.
//
// UpstreamExchange owns:
//  - the slot: GroupRuntime::acquire() and the queue callbacks (Waiter), the 503 + Retry-After
//    answer when the queue is full or the wait too long (respond_busy(), the only place it is
//    built);
//  - the connection: a pooled one or a new connect, and the stale-connection retry (a pooled
//    connection that turns out closed is retried once on a fresh one, not counted as a try);
//    in an https group the TLS handshake ends the connect (connect_timeout, a connect failure
//    for the retry policy) and the write loop and receive() go through the connection's
//    tls::Stream: one null-pointer test on the plain path;
//  - the I/O timer: connect_timeout while connecting, send_timeout while a write is blocked,
//    read_timeout once the request is written and between reads;
//  - the write loop and its replay buffer: out_ keeps every request byte (up to kReplayLimit)
//    so that a retry can send the request again;
//  - failures: one log line format (log_failure()), passive health, the retry policy
//    (upstream/retry.h), the 502/504 answer;
//  - the order of the end: close (or pool) the connection -> release the slot -> answer -> end().
//
// A protocol derives from it and supplies its codec and what is truly its own. A new protocol
// (AJP13, say) implements exactly these, plus its config reader:
//  1. its codec, pure and unit-tested without a socket, as fastcgi::ResponseReader and
//     proxy::BodyReader are: request encoding into bytes, response bytes into head / body /
//     end events;
//  2. begin(): encode the request head into out_ (and set request_done_ when there is no body),
//     then start();
//  3. Exchange::on_body(): encode each body piece into out_, then return request_bytes_added();
//  4. pick_context(): what the balancer hashes on (client address, hash key);
//  5. on_readable(): receive() into a buffer, feed the codec, and on its events: the head
//     (set head_received_, build response_), body pieces (buffer them or
//     Downstream::send_head()/send_body()), the end (complete_upstream(pool), then answer the
//     client, then end()); a malformed response or a closed connection: fail(kind, what);
//  6. on_attempt(): a new try begins (next server, or a fresh connection after a stale pooled
//     one): reset the codec, rewrite what names the server;
//  7. Exchange::on_writable(): the client took what was queued: read again.
// Optional hooks, for what only one protocol has: on_request_written() (FastCGI sends a
// pipelined follower; the proxy's tunnel shuts its write side), on_write_error() (the proxy
// reads an early answer), on_active_timeout() (the proxy's drain and tunnel),
// on_connection_closed() (FastCGI requeues its follower), on_client_abort() (FCGI_ABORT_REQUEST),
// may_reuse_connection() (the proxy sends long bodies on fresh connections),
// wait_on_full_backlog() (php-fpm's unix socket), on_queued() (FastCGI offers the request to a
// carrier), on_end().
// Everything else (slots, queue, connect, stale retry, timers, write loop, replay, retry policy,
// 502/503/504, log lines, pooling, the order of the end) is the base's, the same for all.
//
// Lifetime: as handlers::Exchange says. end() hands the object to event::dispose_later(); later
// events of the same batch see phase_ == kDone and are ignored.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/clock.h"
#include "event/deferred.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/stream_handler.h"
#include "peregrine/request.h"
#include "peregrine/response.h"
#include "upstream/balancer.h"
#include "upstream/group_runtime.h"
#include "upstream/retry.h"

namespace peregrine::upstream {

// Request bytes kept after they were written, so that a retry can send them again. 64 KiB: the
// size of a read buffer and of kSendHighWater, so that a body large enough to pause the client
// is also the point where we stop keeping it; requests beyond are uploads (mostly POST) that the
// retry policy would not send twice anyway, and 256 KiB per request in flight is real memory at
// ten thousand of them.
inline constexpr size_t kReplayLimit = 64 * 1024;
// Request bytes waiting for the upstream socket before the client's body is paused.
inline constexpr size_t kSendHighWater = 64 * 1024;
// How much one exchange reads in a turn of the event loop before it lets the others have
// theirs. A back end that writes faster than we pass its bytes on (through a compressor, say)
// refills the socket while we work, so reading until EAGAIN never ended: one stream held the
// worker for its whole length while the rest, and every new client, waited. A turn ends at the
// first read past kReadTurnBytes once the batch of events it belongs to has run kReadTurnUs:
// in a busy batch every stream yields after 64 KiB; a stream on its own reads on, as a yield
// costs a poll and a read (64 KiB a turn, whatever the time, cost a 1 MB proxied download
// about 17 % more CPU).
inline constexpr size_t kReadTurnBytes = 64 * 1024;
inline constexpr int64_t kReadTurnUs = 500;

class UpstreamExchange : public handlers::Exchange,
                         public Waiter,
                         public event::Pollable,
                         public event::Disposable {
 public:
  // event::Pollable: the connection's readiness while this exchange uses it.
  void on_ready(uint32_t readiness) final;
  // A request sent with the worker's wait (io_uring) is out, or failed.
  void on_sent(bool ok) final;
  // upstream::Waiter
  void on_slot_ready() override;
  void on_queue_timeout() override;
  // handlers::Exchange: the client is gone.
  void on_abort() override;

 protected:
  enum class Phase : uint8_t {
    kStarting,    // before the first acquire (a protocol may collect the body first)
    kQueued,      // waiting in the group's queue for a slot
    kConnecting,  // a new connection is connecting (or waiting on a full unix backlog)
    kActive,      // the request is being sent and the response read
    kFollowing,   // FastCGI pipelining: sent on another exchange's connection, waiting for it
    kDone,
  };

  // `protocol` names it in log lines ("fastcgi", "proxy").
  UpstreamExchange(const char* protocol, GroupRuntime& group, const Request& request,
                   handlers::Downstream& downstream, event::TimerSet& timers, const Clock& clock);
  ~UpstreamExchange() override;

  // ---- What a protocol calls ----
  // Starts the first attempt (acquire). Returns false when the exchange already ended.
  bool start();
  // Asks the group for a server (again): connects, queues, or answers.
  void acquire(bool first_in_line = false);
  // Writes out_ from out_sent_. Returns false when the caller must stop (the exchange ended, or
  // a write error was handed to on_write_error()).
  bool write_out();
  // Call after appending request body bytes to out_: drops what need not be kept, writes, and
  // returns what Exchange::on_body() returns (false: the client's body pauses until the
  // backlog drained).
  bool request_bytes_added();
  // Reads from the connection into `buffer`. > 0: bytes (got_byte_ set); 0: nothing now, and
  // on_readable() will be called when there is (the socket is empty: EAGAIN; or this turn is
  // over, see kReadTurnBytes: called again after the batch); -1: end of file (errno 0) or an
  // error (errno set).
  ssize_t receive(char* buffer, size_t size);
  // Whether a receive() of `n` bytes into `size` emptied the socket. Bytes that come after it
  // raise a new (edge-triggered) event, so reading again now would only find EAGAIN: the
  // caller may wait for that event. Never after a hang-up (its event is spent) or a turn's end.
  bool drained_by(ssize_t n, size_t size) const;
  // One attempt failed: the stale-connection retry, the log line, passive health, then the
  // retry policy: another server, or the answer. `what` is also the health log's reason.
  void fail(Failure failure, const char* what, const char* detail = "");
  // A pooled connection turned out unusable before it carried any of our answer: try again on a
  // fresh connection to the same server, without counting a try. False when that is not safe
  // (nothing to do then: call fail()).
  bool retry_on_fresh_connection();
  // The response ended: the connection goes back to the pool (`pool`) or is closed, the server
  // counts a success, the slot is freed (which may start a queued request). Answer the client
  // and end() after this.
  void complete_upstream(bool pool);
  // Gives up: closes, releases, answers `status` (or closes the client connection when part of
  // the response is out) and ends.
  void abandon(int status);
  // 503 with Retry-After (the queue is full, or the wait was too long), and the end.
  void respond_busy();
  // Closes the connection (if any) and disarms the I/O timer.
  void close_upstream();
  void release_slot();
  // The exchange is over: leaves the queue, disarms the timers, disposes of itself later.
  void end();
  void arm_io(int64_t duration_ms);
  void disarm_io() { event::TimerList::disarm(io_timer_); }
  // `protocol` upstream `address` (group "`name`"): `what`[: `detail`] for "METHOD target"
  void log_failure(const char* what, const char* detail = "") const;
  const config::UpstreamServer& server() const { return group_.server(server_); }
  // For the access log's $upstream_*: the server that answered, its status, the time since
  // the exchange started.
  void note_upstream(int status) {
    request_.upstream = {server().address, static_cast<uint16_t>(status),
                         static_cast<int32_t>(clock_.monotonic_ms - started_ms_)};
  }
  const config::UpstreamGroup& group_config() const { return group_.config(); }
  int64_t now_ms() const { return clock_.monotonic_ms; }

  // ---- Hooks ----
  // What the balancer picks by (client address for ip_hash, key for hash).
  virtual PickContext pick_context() = 0;
  // The connection is readable (or hung up): read and decode.
  virtual void on_readable() = 0;
  // A new attempt starts on conn_ (a new server, or a fresh connection after a stale one);
  // out_ is sent again from out_sent_ (0 unless the request could not be kept).
  virtual void on_attempt() {}
  // Everything in out_ was written (the I/O timer is set already).
  virtual void on_request_written() {}
  // A write failed with `error`. Default: fail(kReset).
  virtual void on_write_error(int error);
  // The I/O timer fired while kActive. Default: a timeout before or in the response body.
  virtual void on_active_timeout();
  // conn_ was closed (by the base or the protocol): forget what was tied to it.
  virtual void on_connection_closed() {}
  // The client went away with conn_ in use (before it is closed): tell the back end if it can
  // be told.
  virtual void on_client_abort() {}
  // May a pooled connection carry this request? (false: always a new one)
  virtual bool may_reuse_connection() const { return true; }
  // A unix socket's full listen backlog (EAGAIN on connect): wait a little and try again,
  // bounded by queue_timeout, instead of failing.
  virtual bool wait_on_full_backlog() const { return false; }
  // The exchange joined the queue.
  virtual void on_queued() {}
  // The exchange ends (end()): protocol clean-up.
  virtual void on_end() {}
  // The connection is ready (new, or taken from the pool): true when the protocol first checks
  // it (AJP's CPING on a connection that idled long) and calls write_out() itself later.
  virtual bool hold_request() { return false; }

  const char* const protocol_;
  GroupRuntime& group_;
  const Request& request_;
  handlers::Downstream& downstream_;
  event::TimerSet& timers_;
  const Clock& clock_;

  Phase phase_ = Phase::kStarting;
  // Server choice and retries.
  TriedSet tried_;
  size_t server_ = 0;
  bool has_slot_ = false;
  uint32_t tries_ = 0;  // servers tried (stale-connection retries do not count)
  int64_t started_ms_ = 0;
  int last_status_ = 502;

  // The connection and what happened on it.
  UpstreamConnection* conn_ = nullptr;
  bool got_byte_ = false;       // a response byte came on conn_
  bool hung_up_ = false;        // conn_ reported a hang-up: never pooled after us
  bool head_received_ = false;  // the protocol parsed the response head (timeouts: in the body)

  // Request bytes. While replayable_, out_ holds every byte from the start of the request
  // (out_sent_ = how far it was written), so a retry can send it again.
  std::string out_;
  size_t out_sent_ = 0;
  bool replayable_ = true;
  bool sent_any_ = false;       // a request byte was written on this attempt
  bool request_done_ = false;   // every request byte is in out_ (the body has ended)
  bool body_paused_ = false;    // on_body() returned false: resume_body() once drained
  bool write_blocked_ = false;  // waiting for the socket to take more
  // io_uring: a small request goes with the worker's next wait (UpstreamConnection::
  // send_with_wait), not send(2). Worth it where the back end is slow to answer anyway: set by
  // FastCGI (PHP hello 0.953x and 0.973x CPU per request, side by side in two runs) and AJP
  // (Tomcat: 0.84x-0.99x). A fast back end loses more than the system call saves, as the
  // request then waits for the end of the worker's batch: proxying to nginx took 1.05x and
  // 1.02x, with 5 % fewer requests a second and a p99 15-25 % higher, so the proxy keeps
  // send(2).
  bool send_with_wait_ = false;

  Response response_;

 private:
  struct IoTimerOwner final : event::TimerOwner {
    UpstreamExchange* exchange = nullptr;
    void on_timeout() override { exchange->on_io_timeout(); }
  };
  struct ReadAgainOwner final : event::TimerOwner {
    UpstreamExchange* exchange = nullptr;
    void on_timeout() override { exchange->read_again(); }
  };
  void connect(bool fresh_only);
  bool handshake();
  void connected();
  void on_io_timeout();
  void read_again();
  // The request waits for room (a full socket, or the ring's send under way): under the send
  // timeout, armed when the wait starts.
  void wait_to_write();

  event::TimerNode io_timer_;
  IoTimerOwner io_timer_owner_;
  // The read put off at the end of a turn (TimerSet::arm_soon), and what this turn has read.
  event::TimerNode read_again_;
  ReadAgainOwner read_again_owner_;
  size_t read_this_turn_ = 0;
  bool ended_ = false;
  bool handshaking_ = false;  // the TCP connect succeeded; the TLS handshake is under way
};

}  // namespace peregrine::upstream
