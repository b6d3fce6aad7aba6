#include "admin/log_tail.h"

#include <deque>
#include <string>

#include "admin/live_api.h"
#include "core/log_tap.h"
#include "event/timer_list.h"

namespace peregrine::admin {

namespace {

class LogTailExchange final : public handlers::Exchange, public event::TimerOwner {
 public:
  LogTailExchange(const handlers::WorkerEnv& env, handlers::Downstream& downstream, uint8_t streams,
                  std::string filter)
      : env_(env), downstream_(downstream), subscriber_(streams, std::move(filter)) {
    timer_.owner = this;
  }

  // Sends the head and the first comment; false when the client is already gone (the exchange
  // is then freed).
  bool begin() {
    Response head;
    head.set_status(200);
    head.set_content_type("text/event-stream; charset=utf-8");
    head.add_header("Cache-Control", "no-store");
    head.add_header("X-Accel-Buffering", "no");  // a proxy in front must not hold events back
    if (!downstream_.send_head(head, -1)) {
      delete this;
      return false;
    }
    log_tap::subscribe(&subscriber_);
    last_sent_ms_ = env_.clock.monotonic_ms;
    env_.timers.arm(timer_, LogTailHandler::kPollMs, env_.clock.monotonic_ms);
    // Tells the client the subscription is in place: lines written from now on will come.
    return send(": subscribed\nretry: 2000\n\n");
  }

  bool on_body(std::string_view, bool) override { return true; }
  void on_writable() override {
    full_ = false;
    pump();
  }
  void on_abort() override { end(); }
  void on_timeout() override {
    if (env_.draining && *env_.draining) {  // a graceful stop: the stream ends cleanly
      downstream_.finish();
      end();
      return;
    }
    env_.timers.arm(timer_, LogTailHandler::kPollMs, env_.clock.monotonic_ms);
    pump();
  }

 private:
  void pump() {
    if (full_) return;  // the client is behind: lines pile up (and drop) in the subscriber
    lines_.clear();
    const uint64_t dropped = subscriber_.take(lines_);
    out_.clear();
    if (dropped) out_ += ": dropped " + std::to_string(dropped) + " lines (client too slow)\n\n";
    for (const log_tap::Subscriber::Line& line : lines_)
      append_event(out_, line.stream == log_tap::kAccess ? "access" : "error", line.text);
    if (out_.empty()) {
      if (env_.clock.monotonic_ms - last_sent_ms_ < LogTailHandler::kHeartbeatMs) return;
      out_ = ": heartbeat\n\n";
    }
    send(out_);
  }

  // False when the exchange ended (the client is gone).
  bool send(std::string_view bytes) {
    last_sent_ms_ = env_.clock.monotonic_ms;
    switch (downstream_.send_body(bytes)) {
      case handlers::Downstream::Sent::kMore:
        return true;
      case handlers::Downstream::Sent::kFull:
        full_ = true;
        return true;
      case handlers::Downstream::Sent::kGone:
        break;
    }
    end();
    return false;
  }

  void end() {
    log_tap::unsubscribe(&subscriber_);
    event::TimerList::disarm(timer_);
    delete this;
  }

  handlers::WorkerEnv env_;
  handlers::Downstream& downstream_;
  log_tap::Subscriber subscriber_;
  event::TimerNode timer_;
  std::deque<log_tap::Subscriber::Line> lines_;
  std::string out_;
  int64_t last_sent_ms_ = 0;
  bool full_ = false;
};

}  // namespace

void append_event(std::string& out, std::string_view stream, std::string_view line) {
  out.append("event: ").append(stream).append("\ndata: ");
  for (char c : line) out.push_back(c == '\r' ? ' ' : c);
  out.append("\n\n");
}

handlers::Exchange* LogTailHandler::start(const Request& request,
                                          handlers::Downstream& downstream) {
  Response response;
  if (!router_->admit(request, response)) {
    downstream.respond(response);
    return nullptr;
  }
  if (request.method != Method::kGet) {
    response.add_header("Allow", "GET");
    refuse(request, response, 405, "the log tail only answers GET");
    downstream.respond(response);
    return nullptr;
  }
  const std::string stream = query_value(request.query, "stream").value_or("both");
  const uint8_t streams = log_tap::streams_from(stream);
  if (streams == 0) {
    refuse(request, response, 400, "stream is access, error or both");
    downstream.respond(response);
    return nullptr;
  }
  auto* exchange = new LogTailExchange(env_, downstream, streams,
                                       query_value(request.query, "filter").value_or(""));
  if (!exchange->begin()) return nullptr;  // it ended itself
  return exchange;
}

}  // namespace peregrine::admin
