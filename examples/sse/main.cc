// Server-sent events in callback style: each client of /events gets one event a second from a
// repeating timer on its worker's loop; the client's disconnect cancels the timer.
//
//   GET /events   → text/event-stream: "id: N\ndata: {"n": N, "worker": W}\n\n" every interval
//   GET /stats    → {"open": streams now open, "closed": streams ended by their client}
//
// The counters are per worker (no lock: everything of a worker runs on its thread), so /stats
// is exact with --workers 1 and per worker otherwise.
//
// Usage: sse [--listen ADDR] [--workers N] [--interval-ms MS]
#include <cstdlib>
#include <memory>
#include <string>

#include "../common/command_line.h"
#include "peregrine/async.h"
#include "peregrine/server.h"
#include "peregrine/worker.h"

namespace {

struct Counters {
  int open = 0;
  int closed = 0;
};
thread_local Counters counters;  // this worker's

class EventStream final : public peregrine::AsyncHandler {
 public:
  explicit EventStream(std::chrono::milliseconds interval) : interval_(interval) {}

  void handle(const peregrine::Request& request, peregrine::AsyncResponse res) override {
    if (request.path == "/stats") {
      res.response().set_content_type("application/json");
      res.response().set_body("{\"open\": " + std::to_string(counters.open) +
                              ", \"closed\": " + std::to_string(counters.closed) + "}\n");
      res.respond();
      return;
    }
    res.response().set_content_type("text/event-stream");
    res.response().add_header("Cache-Control", "no-store");
    if (!res.start()) return;
    res.send(": connected\n\n");  // the head and a comment at once: clients see the stream open
    ++counters.open;
    auto stream = std::make_shared<State>();
    peregrine::Worker& worker = res.worker();
    stream->timer = worker.every(interval_, [res, stream]() mutable {
      ++stream->n;
      std::string event = "id: " + std::to_string(stream->n) +
                          "\ndata: {\"n\": " + std::to_string(stream->n) +
                          ", \"worker\": " + std::to_string(res.worker().id()) + "}\n\n";
      // A slow reader (kFull) just misses nothing: the bytes are queued; the timer goes on.
      res.send(event);
    });
    // The client left: stop the timer, which releases its copy of `res` and ends the exchange.
    res.on_cancel([stream, &worker] {
      worker.cancel(stream->timer);
      --counters.open;
      ++counters.closed;
    });
  }

 private:
  struct State {
    peregrine::Worker::TimerId timer = 0;
    uint64_t n = 0;
  };
  std::chrono::milliseconds interval_;
};

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  auto options = examples::apply_command_line(server, argc, argv);
  auto interval = std::chrono::milliseconds(1000);
  if (options.count("--interval-ms"))
    interval = std::chrono::milliseconds(std::max(1, std::atoi(options["--interval-ms"].c_str())));
  auto stream = std::make_shared<EventStream>(interval);
  server.route_async("/events", stream).route_async("/stats", stream);
  return server.run();
}
