#include "upstream/health_check.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "core/log.h"
#include "event/deferred.h"
#include "http/http1/response_parser.h"
#include "tls/client_context.h"

namespace peregrine::upstream {

// One server's probe: idle (its timer counts down the interval) or in flight (connecting,
// sending, reading; its timer counts down the timeout). Connections are never reused: a probe
// measures whether a new connection gets an answer.
class HealthChecker::Probe final : public event::Pollable,
                                   public event::TimerOwner,
                                   public event::Disposable {
 public:
  Probe(GroupRuntime& group, event::Poller& poller, event::TimerSet& timers, const Clock& clock,
        size_t server)
      : group_(group), poller_(poller), timers_(timers), clock_(clock), server_(server) {
    const config::HealthCheck& check = group.config().health_check;
    const std::string& address = group.server(server).address;
    std::string host = check.host;
    if (host.empty()) host = address.starts_with("unix:") ? "localhost" : address;
    if (check.ajp_cping)
      request_.assign(kAjpCping, sizeof kAjpCping);
    else
      request_ = "GET " + (check.path.empty() ? std::string("/") : check.path) +
                 " HTTP/1.1\r\nHost: " + host +
                 "\r\nUser-Agent: peregrine-health-check\r\nAccept: */*\r\nConnection: "
                 "close\r\n\r\n";
    timer_.owner = this;
    // The first probe goes out at once (on the next timer sweep): a server that is down when
    // the worker starts should not stay in the rotation for a whole interval.
    timers_.arm(timer_, 0, clock_.monotonic_ms);
  }

  ~Probe() override {
    event::TimerList::disarm(timer_);
    tls_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  // Stops everything; the object is freed after the current batch of events.
  void retire() {
    retired_ = true;
    event::TimerList::disarm(timer_);
    close_socket();
    event::dispose_later(this);
  }

  size_t done() const { return done_; }

  void on_timeout() override {
    if (retired_) return;
    if (phase_ == Phase::kIdle)
      start();
    else
      finish(false, "timed out");
  }

  void on_ready(uint32_t readiness) override {
    if (retired_ || fd_ < 0) return;
    if (phase_ == Phase::kConnecting) {
      if ((readiness & (event::kOut | event::kHangup)) == 0) return;
      int error = connect_result(fd_);
      if (error != 0) {
        finish(false, std::strerror(error));
        return;
      }
      phase_ = Phase::kSending;
      if (group_.tls_context()) {
        // An https group is probed over TLS, as its requests go: a server whose certificate
        // no longer verifies is out of the rotation before a request finds out.
        tls_ = group_.open_tls(fd_, server_);
        if (!tls_) {
          finish(false, "cannot create a TLS session");
          return;
        }
        phase_ = Phase::kHandshake;
      }
    }
    if (phase_ == Phase::kHandshake) {
      switch (tls_->handshake()) {
        case tls::Stream::Progress::kDone:
          phase_ = Phase::kSending;
          break;
        case tls::Stream::Progress::kWantIo:
          return;
        case tls::Stream::Progress::kFailed: {
          std::string reason = "TLS handshake failed: " + tls::ClientContext::failure_reason(*tls_);
          finish(false, reason.c_str());
          return;
        }
      }
    }
    if (phase_ == Phase::kSending) {
      send_request();
      if (phase_ != Phase::kReading) return;
    }
    if (phase_ == Phase::kReading && (readiness & (event::kIn | event::kHangup))) read_response();
  }

 private:
  enum class Phase : uint8_t { kIdle, kConnecting, kHandshake, kSending, kReading };
  // AJP13's CPING and the CPONG that answers it (handlers/ajp/protocol.h; upstream/ cannot
  // include a handler's codec).
  static constexpr char kAjpCping[] = {0x12, 0x34, 0x00, 0x01, 0x0A};
  static constexpr char kAjpCpong[] = {'A', 'B', 0x00, 0x01, 0x09};
  // The head is all we look at; a larger one is a failure.
  static constexpr size_t kMaxResponseBytes = 16 * 1024;

  void start() {
    const config::HealthCheck& check = group_.config().health_check;
    in_.clear();
    sent_ = 0;
    parser_.start(false);
    fd_ = connect_to(group_.server(server_));
    if (fd_ < 0) {
      finish(false, std::strerror(errno));
      return;
    }
    if (!poller_.add(fd_, event::kReadable | event::kWritable | event::kEdgeTriggered, this)) {
      finish(false, std::strerror(errno));
      return;
    }
    phase_ = Phase::kConnecting;
    timers_.arm(timer_, check.timeout.count(), clock_.monotonic_ms);
  }

  void send_request() {
    while (sent_ < request_.size()) {
      ssize_t n = tls_
                      ? tls_->write(request_.data() + sent_, request_.size() - sent_)
                      : ::send(fd_, request_.data() + sent_, request_.size() - sent_, MSG_NOSIGNAL);
      if (n > 0) {
        sent_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      finish(false, n < 0 ? std::strerror(errno) : "send failed");
      return;
    }
    phase_ = Phase::kReading;
  }

  void read_response() {
    char buffer[4096];
    for (;;) {
      ssize_t n = tls_ ? tls_->read(buffer, sizeof buffer) : ::recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        in_.append(buffer, static_cast<size_t>(n));
        if (group_.config().health_check.ajp_cping) {
          if (in_.size() < sizeof kAjpCpong) continue;
          if (std::string_view(in_).substr(0, sizeof kAjpCpong) ==
              std::string_view(kAjpCpong, sizeof kAjpCpong))
            finish(true, "");
          else
            finish(false, "no CPONG in answer to CPING");
          return;
        }
        http1::ResponseParser::Result r = parser_.parse(in_);
        if (parser_.head_complete() &&
            !(r.status == http1::ResponseParser::Status::kError && r.consumed == 0)) {
          judge(parser_.head().status);
          return;
        }
        if (r.status == http1::ResponseParser::Status::kError) {
          finish(false, parser_.error());
          return;
        }
        if (in_.size() > kMaxResponseBytes) {
          finish(false, "response head too large");
          return;
        }
        continue;
      }
      if (n == 0) {
        finish(false, in_.empty() ? "closed without a response" : "closed in the response head");
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      finish(false, std::strerror(errno));
      return;
    }
  }

  void judge(int status) {
    const config::HealthCheck& check = group_.config().health_check;
    if (status >= check.expect_status_min && status <= check.expect_status_max) {
      finish(true, "");
      return;
    }
    char why[64];
    std::snprintf(why, sizeof why, "status %d", status);
    finish(false, why);
  }

  void close_socket() {
    if (tls_) {
      // Whatever happened after the handshake, the session stays resumable (OpenSSL would mark
      // it spent when freed without a shutdown): mark the session ended without sending.
      if (tls_->handshake_done())
        SSL_set_shutdown(tls_->ssl(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
      tls_.reset();
    }
    if (fd_ < 0) return;
    poller_.remove(fd_);
    ::close(fd_);
    fd_ = -1;
  }

  void finish(bool ok, const char* why) {
    const config::HealthCheck& check = group_.config().health_check;
    close_socket();
    phase_ = Phase::kIdle;
    ++done_;
    group_.record_check(server_, ok);  // metrics
    if (ok) {
      failures_ = 0;
      ++successes_;
      if (!up_ && successes_ >= check.rise) {
        up_ = true;
        group_.set_probe_up(server_, true);
      }
    } else {
      successes_ = 0;
      ++failures_;
      LOG_DEBUG("upstream %s: health check of %s failed: %s", group_.config().name.c_str(),
                group_.server(server_).address.c_str(), why);
      if (up_ && failures_ >= check.fall) {
        up_ = false;
        LOG_WARN("upstream %s: health check of %s failed %u time(s) in a row (last: %s)",
                 group_.config().name.c_str(), group_.server(server_).address.c_str(), failures_,
                 why);
        group_.set_probe_up(server_, false);
      }
    }
    timers_.arm(timer_, check.interval.count(), clock_.monotonic_ms);
  }

  GroupRuntime& group_;
  event::Poller& poller_;
  event::TimerSet& timers_;
  const Clock& clock_;
  const size_t server_;
  std::string request_;
  event::TimerNode timer_;
  Phase phase_ = Phase::kIdle;
  bool retired_ = false;
  int fd_ = -1;
  std::unique_ptr<tls::Stream> tls_;  // an https group's session on fd_
  size_t sent_ = 0;
  std::string in_;
  http1::ResponseParser parser_;
  bool up_ = true;  // servers start in the rotation, as with passive health
  uint32_t successes_ = 0;
  uint32_t failures_ = 0;
  size_t done_ = 0;
};

HealthChecker::HealthChecker(GroupRuntime& group, event::Poller& poller, event::TimerSet& timers,
                             const Clock& clock) {
  probes_.reserve(group.config().servers.size());
  for (size_t i = 0; i < group.config().servers.size(); ++i)
    probes_.push_back(new Probe(group, poller, timers, clock, i));
}

HealthChecker::~HealthChecker() {
  for (Probe* probe : probes_) probe->retire();
}

size_t HealthChecker::probes_done(size_t server) const {
  return server < probes_.size() ? probes_[server]->done() : 0;
}

}  // namespace peregrine::upstream
