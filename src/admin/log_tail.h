// GET /api/logs?stream=access|error|both&filter=TEXT: the access and error logs, live, as
// server-sent events (text/event-stream): "event: access" or "event: error", then "data: LINE",
// for every line written after the request (core/log_tap.h), with a comment line every 15 s
// so that proxies and browsers keep the stream open, and ": dropped N lines" when the client
// read too slowly and the queue overflowed.
//
// The admin's other endpoints answer at once (peregrine::Handler); this one answers for as long
// as the client stays, so it is a handlers::StreamHandler: RouteTable::select_admin gives it
// its own route of the admin site (admin_part() == kLogs), and the connection runs it like a
// proxy exchange. The exchange polls its subscriber queue on a 250 ms timer of the worker: no
// other thread ever touches the connection. A graceful stop (SIGQUIT, an upgrade) ends the stream
// at the next poll.
#pragma once

#include <memory>

#include "admin/handler.h"
#include "handlers/stream_handler.h"

namespace peregrine::admin {

class LogTailHandler final : public handlers::StreamHandler {
 public:
  LogTailHandler(std::shared_ptr<AdminHandler> router, const handlers::WorkerEnv& env)
      : router_(std::move(router)), env_(env) {}
  handlers::Exchange* start(const Request& request, handlers::Downstream& downstream) override;

  static constexpr int64_t kPollMs = 250;
  static constexpr int64_t kHeartbeatMs = 15'000;

 private:
  std::shared_ptr<AdminHandler> router_;
  handlers::WorkerEnv env_;
};

// One SSE event for `line` of `stream` (a '\r' in it becomes a space: it would end the field).
void append_event(std::string& out, std::string_view stream, std::string_view line);

}  // namespace peregrine::admin
