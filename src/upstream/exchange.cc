#include "upstream/exchange.h"

#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/spares.h"
#include "tls/client_context.h"

namespace peregrine::upstream {

namespace {
// php-fpm's listen backlog is full: try the connect again this soon.
constexpr int64_t kBacklogRetryMs = 5;
// Requests up to this size may go with the worker's wait on io_uring (send_with_wait_; the
// poller keeps a copy); longer ones take send(2), as a client's longer answers do.
constexpr size_t kSendWithWaitLimit = 4 * 1024;
}  // namespace

UpstreamExchange::UpstreamExchange(const char* protocol, GroupRuntime& group,
                                   const Request& request, handlers::Downstream& downstream,
                                   event::TimerSet& timers, const Clock& clock)
    : protocol_(protocol),
      group_(group),
      request_(request),
      downstream_(downstream),
      timers_(timers),
      clock_(clock),
      tried_(group.config().servers.size()) {
  io_timer_owner_.exchange = this;
  io_timer_.owner = &io_timer_owner_;
  read_again_owner_.exchange = this;
  read_again_.owner = &read_again_owner_;
  Spares<std::string>::take(out_);
  Spares<Response>::take(response_);
}

UpstreamExchange::~UpstreamExchange() {
  // end() closed the connection and left the queue: the group may be gone by now (a reload).
  event::TimerList::disarm(io_timer_);
  event::TimerList::disarm(read_again_);
  Spares<std::string>::give(out_);
  Spares<Response>::give(response_);
}

bool UpstreamExchange::start() {
  started_ms_ = clock_.monotonic_ms;
  acquire();
  return phase_ != Phase::kDone;
}

void UpstreamExchange::acquire(bool first_in_line) {
  PickContext context = pick_context();
  switch (group_.acquire(context, tried_, *this, &server_, first_in_line)) {
    case GroupRuntime::Acquire::kReady:
      has_slot_ = true;
      tried_.insert(server_);
      ++tries_;
      connect(false);
      return;
    case GroupRuntime::Acquire::kQueued:
      phase_ = Phase::kQueued;
      on_queued();
      return;
    case GroupRuntime::Acquire::kQueueFull:
      if (uint64_t held; log::enabled(LogLevel::kWarn) && group_.may_log_group_line(&held))
        LOG_WARN("%s upstream group \"%s\": wait queue full (%zu) for \"%.*s %.*s\": 503%s",
                 protocol_, group_.config().name.c_str(), group_.queued(),
                 static_cast<int>(request_.method_text.size()), request_.method_text.data(),
                 static_cast<int>(request_.target.size()), request_.target.data(),
                 SuppressedNote(held).text);
      respond_busy();
      return;
    case GroupRuntime::Acquire::kUnavailable:
      // After a failed try, the servers left are down or tried: the last try's answer.
      if (uint64_t held;
          tries_ == 0 && log::enabled(LogLevel::kError) && group_.may_log_group_line(&held))
        LOG_ERROR("%s upstream group \"%s\": no server available for \"%.*s %.*s\"%s", protocol_,
                  group_.config().name.c_str(), static_cast<int>(request_.method_text.size()),
                  request_.method_text.data(), static_cast<int>(request_.target.size()),
                  request_.target.data(), SuppressedNote(held).text);
      abandon(tries_ == 0 ? 502 : last_status_);
      return;
  }
}

void UpstreamExchange::on_slot_ready() {
  if (phase_ == Phase::kQueued) acquire();
}

void UpstreamExchange::on_queue_timeout() {
  // A request sent ahead on another's connection (kFollowing), or waiting on a full backlog
  // (kConnecting without a connection), waits no longer than a queued one.
  if (phase_ != Phase::kQueued && phase_ != Phase::kConnecting && phase_ != Phase::kFollowing)
    return;
  if (uint64_t held; log::enabled(LogLevel::kWarn) && group_.may_log_group_line(&held))
    LOG_WARN(
        "%s upstream group \"%s\": \"%.*s %.*s\" waited too long (%lld ms) for a free slot: 503%s",
        protocol_, group_.config().name.c_str(), static_cast<int>(request_.method_text.size()),
        request_.method_text.data(), static_cast<int>(request_.target.size()),
        request_.target.data(), static_cast<long long>(group_.config().queue_timeout.count()),
        SuppressedNote(held).text);
  respond_busy();
}

void UpstreamExchange::connect(bool fresh_only) {
  phase_ = Phase::kConnecting;
  handshaking_ = false;
  got_byte_ = false;
  hung_up_ = false;
  head_received_ = false;
  write_blocked_ = false;
  sent_any_ = false;
  if (replayable_) out_sent_ = 0;
  on_attempt();
  conn_ = fresh_only || !may_reuse_connection() ? nullptr : group_.take_idle(server_, *this);
  if (conn_) {
    connected();
    return;
  }
  conn_ = group_.open(server_, *this);
  if (!conn_) {
    if (errno == EAGAIN && wait_on_full_backlog()) {
      // The listen backlog of a unix socket is full (php-fpm busy): wait like a queued request,
      // not a failure of the server.
      if (clock_.monotonic_ms - started_ms_ >= group_.config().queue_timeout.count()) {
        on_queue_timeout();
        return;
      }
      arm_io(kBacklogRetryMs);
      return;
    }
    fail(Failure::kRefused, "connect failed", std::strerror(errno));
    return;
  }
  arm_io(group_.config().connect_timeout.count());
  // Writability tells us the connect finished; on_ready() then calls connected().
}

// The TLS handshake is part of the connect: connect_timeout covers it, and its failure is a
// connect failure for the retry policy (nothing of the request was sent).
bool UpstreamExchange::handshake() {
  tls::Stream& stream = *conn_->tls();
  switch (stream.handshake()) {
    case tls::Stream::Progress::kDone:
      handshaking_ = false;
      return true;
    case tls::Stream::Progress::kWantIo:
      handshaking_ = true;  // the TCP connect is done: later readiness is the handshake's
      return false;
    case tls::Stream::Progress::kFailed:
      break;
  }
  handshaking_ = false;
  fail(Failure::kRefused, "TLS handshake failed",
       tls::ClientContext::failure_reason(stream).c_str());
  return false;
}

void UpstreamExchange::connected() {
  phase_ = Phase::kActive;
  if (hold_request()) return;
  write_out();  // sets the timer: send_timeout if blocked, read_timeout once all is out
}

void UpstreamExchange::on_ready(uint32_t readiness) {
  if (phase_ == Phase::kDone || !conn_) return;
  read_this_turn_ = 0;
  if (readiness & event::kHangup) hung_up_ = true;
  if (phase_ == Phase::kConnecting) {
    if (!(readiness & (event::kOut | event::kIn | event::kHangup))) return;
    if (!handshaking_) {
      int error = connect_result(conn_->fd());
      if (error != 0) {
        fail(Failure::kRefused, "connect failed", std::strerror(error));
        return;
      }
    }
    if (conn_->tls() && !handshake()) return;
    connected();
    if (phase_ != Phase::kActive || !conn_) return;
  } else if ((readiness & event::kOut) && out_sent_ < out_.size()) {
    if (!write_out()) return;
  }
  if (readiness & (event::kIn | event::kHangup)) on_readable();
}

bool UpstreamExchange::write_out() {
  if (conn_->sending()) return true;  // the ring's send goes first; on_sent() writes the rest
  tls::Stream* tls = conn_->tls();
  while (out_sent_ < out_.size()) {
    const size_t left = out_.size() - out_sent_;
    if (send_with_wait_ && left <= kSendWithWaitLimit &&
        conn_->send_with_wait({out_.data() + out_sent_, left})) {
      // Until it is out, the exchange waits as if the socket were full (the send timeout);
      // on_sent() then goes on from here.
      out_sent_ = out_.size();
      sent_any_ = true;
      wait_to_write();
      return true;
    }
    ssize_t n =
        tls ? tls->write(out_.data() + out_sent_, out_.size() - out_sent_)
            : ::send(conn_->fd(), out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
    if (n > 0) {
      out_sent_ += static_cast<size_t>(n);
      sent_any_ = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      conn_->watch_writable(true);  // tell us when it drains
      wait_to_write();
      return true;
    }
    on_write_error(n < 0 ? errno : EPIPE);
    return false;
  }
  // Nothing left to write: writability is news no more.
  conn_->watch_writable(false);
  write_blocked_ = false;
  if (!replayable_) {
    out_.clear();
    out_sent_ = 0;
  }
  // The back end has the whole request: its answer is what we wait for. Otherwise we wait for
  // the client's body, which its connection times (body_timeout).
  if (request_done_)
    arm_io(group_.config().read_timeout.count());
  else
    disarm_io();
  on_request_written();
  if (phase_ == Phase::kDone) return false;
  if (body_paused_) {
    body_paused_ = false;
    downstream_.resume_body();  // may call on_body() (and end us): nothing after this
    return phase_ != Phase::kDone;
  }
  return true;
}

void UpstreamExchange::wait_to_write() {
  if (write_blocked_) return;
  write_blocked_ = true;
  arm_io(group_.config().send_timeout.count());
}

bool UpstreamExchange::request_bytes_added() {
  if (replayable_ && out_.size() > kReplayLimit) replayable_ = false;  // too long to keep
  if (!replayable_ && out_sent_ > 0) {                                 // reuse the buffer's start
    out_.erase(0, out_sent_);
    out_sent_ = 0;
  }
  if (phase_ == Phase::kActive && conn_ && !write_out()) return false;
  if (phase_ == Phase::kDone) return false;
  if (out_.size() - out_sent_ > kSendHighWater) {
    body_paused_ = true;
    return false;
  }
  return true;
}

void UpstreamExchange::on_sent(bool ok) {
  if (phase_ != Phase::kActive || !conn_) return;
  if (!ok) {
    on_write_error(EPIPE);
    return;
  }
  write_out();
}

ssize_t UpstreamExchange::receive(char* buffer, size_t size) {
  // The worker's Clock is read once per batch, so its monotonic_us is when the batch began.
  if (read_this_turn_ >= kReadTurnBytes &&
      Clock::precise_monotonic_us() - clock_.monotonic_us >= kReadTurnUs) {
    // What is left may raise no other event (edge-triggered, or inside TLS): ask for a turn.
    timers_.arm_soon(read_again_);
    return 0;
  }
  tls::Stream* tls = conn_->tls();
  for (;;) {
    ssize_t n = tls ? tls->read(buffer, size) : ::recv(conn_->fd(), buffer, size, 0);
    if (n > 0) {
      got_byte_ = true;
      read_this_turn_ += static_cast<size_t>(n);
      return n;
    }
    if (n == 0) {
      errno = 0;
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

bool UpstreamExchange::drained_by(ssize_t n, size_t size) const {
  if (hung_up_ || n <= 0) return false;
  // TLS: a short read may leave whole records in the socket or in OpenSSL's buffer.
  if (const tls::Stream* tls = conn_->tls()) return tls->drained();
  return static_cast<size_t>(n) < size;
}

void UpstreamExchange::read_again() {
  read_this_turn_ = 0;
  if (phase_ == Phase::kActive && conn_) on_readable();
}

void UpstreamExchange::on_write_error(int error) {
  fail(Failure::kReset, "sending the request failed", std::strerror(error));
}

void UpstreamExchange::on_io_timeout() {
  switch (phase_) {
    case Phase::kConnecting:
      if (!conn_) {  // the backlog wait
        connect(false);
        return;
      }
      fail(Failure::kConnectTimeout,
           handshaking_ ? "TLS handshake timed out" : "connect timed out");
      return;
    case Phase::kActive:
      on_active_timeout();
      return;
    case Phase::kStarting:
    case Phase::kQueued:
    case Phase::kFollowing:
    case Phase::kDone:
      return;
  }
}

void UpstreamExchange::on_active_timeout() {
  if (write_blocked_)
    fail(Failure::kTimeout, "timed out sending the request");
  else if (head_received_)
    fail(Failure::kTimeoutInBody, "timed out reading the response body");
  else
    fail(Failure::kTimeout, "timed out waiting for the response");
}

bool UpstreamExchange::retry_on_fresh_connection() {
  if (!conn_ || !conn_->reused() || !(replayable_ || !sent_any_)) return false;
  LOG_DEBUG("%s upstream %s: the pooled connection was closed by the back end; reconnecting",
            protocol_, server().address.c_str());
  close_upstream();
  connect(true);
  return true;
}

void UpstreamExchange::fail(Failure failure, const char* what, const char* detail) {
  // A pooled connection the back end closed while it idled: not the server's failure.
  if (failure == Failure::kReset && !got_byte_ && retry_on_fresh_connection()) return;
  log_failure(what, detail);
  close_upstream();
  if (has_slot_) group_.counters(server_).failures[static_cast<int>(failure)].add();  // metrics
  if (has_slot_) group_.report_failure(server_, what);
  release_slot();
  last_status_ = status_for(failure);
  Attempt attempt;
  attempt.method = request_.method;
  attempt.failure = failure;
  attempt.request_sent = sent_any_;
  attempt.replayable = replayable_;
  attempt.client_saw_bytes = downstream_.head_sent();
  attempt.tries = tries_;
  attempt.max_tries = group_.config().tries;
  attempt.elapsed_ms = clock_.monotonic_ms - started_ms_;
  attempt.try_timeout_ms = group_.config().try_timeout.count();
  Verdict verdict = decide(attempt);
  if (verdict.retry) {
    out_sent_ = 0;
    sent_any_ = false;
    acquire();
    return;
  }
  abandon(verdict.status);
}

void UpstreamExchange::log_failure(const char* what, const char* detail) const {
  uint64_t held;
  if (!log::enabled(LogLevel::kError) || !group_.may_log_failure(server_, &held)) return;
  LOG_ERROR("%s upstream %s (group \"%s\"): %s%s%s for \"%.*s %.*s\"%s", protocol_,
            server().address.c_str(), group_.config().name.c_str(), what, *detail ? ": " : "",
            detail, static_cast<int>(request_.method_text.size()), request_.method_text.data(),
            static_cast<int>(request_.target.size()), request_.target.data(),
            SuppressedNote(held).text);
}

void UpstreamExchange::complete_upstream(bool pool) {
  disarm_io();
  event::TimerList::disarm(read_again_);
  if (conn_) {
    if (pool && !hung_up_)
      group_.put_idle(conn_);
    else
      group_.close(conn_);
    conn_ = nullptr;
    on_connection_closed();
  }
  if (has_slot_) group_.report_success(server_);
  release_slot();
}

void UpstreamExchange::abandon(int status) {
  close_upstream();
  release_slot();
  phase_ = Phase::kDone;
  downstream_.fail(status);  // the error page, or a close when part of the response is out
  end();
}

void UpstreamExchange::respond_busy() {
  close_upstream();
  release_slot();
  phase_ = Phase::kDone;
  response_.clear();
  response_.set_status(503);
  response_.add_header("Retry-After", "1");
  downstream_.respond(response_);  // the site's error page fills the empty body
  end();
}

void UpstreamExchange::on_abort() {
  if (phase_ == Phase::kDone) return;
  if (conn_ && phase_ == Phase::kActive) on_client_abort();
  group_.cancel(*this);
  close_upstream();
  release_slot();
  end();
}

void UpstreamExchange::close_upstream() {
  disarm_io();
  event::TimerList::disarm(read_again_);
  if (!conn_) return;
  group_.close(conn_);
  conn_ = nullptr;
  on_connection_closed();
}

void UpstreamExchange::release_slot() {
  if (!has_slot_) return;
  has_slot_ = false;
  group_.release(server_);  // may start a queued request at once: last
}

void UpstreamExchange::end() {
  if (ended_) return;
  ended_ = true;
  close_upstream();  // normally done already
  release_slot();
  phase_ = Phase::kDone;
  disarm_io();
  event::TimerList::disarm(queue_timer);
  group_.cancel(*this);
  on_end();
  event::dispose_later(this);
}

void UpstreamExchange::arm_io(int64_t duration_ms) {
  if (duration_ms <= 0) {
    disarm_io();
    return;
  }
  timers_.arm(io_timer_, duration_ms, clock_.monotonic_ms);
}

}  // namespace peregrine::upstream
