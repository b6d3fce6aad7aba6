// The program tests/integration/test_library_api.py drives: every public entry point of
// libperegrine (peregrine/server.h, async.h, worker.h) behind a route the test can observe.
//
//   library_app [--listen ADDR] [--workers N]   routes set up in code
//   library_app --config FILE                   routes from a TOML file naming the handlers
//                                               registered below (handler = "NAME")
#include <algorithm>
#include <atomic>
#include <charconv>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "../../examples/common/command_line.h"
#include "peregrine/async.h"
#include "peregrine/server.h"
#include "peregrine/worker.h"

using namespace std::chrono_literals;
using peregrine::AsyncResponse;
using peregrine::IoStatus;
using peregrine::Request;
using peregrine::Response;
using peregrine::Task;

namespace {

std::atomic<int> cancelled_waits{0};  // /async/wait requests whose client went away
std::atomic<int> factory_calls{0};

int64_t query_int(const Request& request, std::string_view name, int64_t fallback) {
  std::string_view q = request.query;
  while (!q.empty()) {
    std::string_view pair = q.substr(0, q.find('&'));
    q.remove_prefix(std::min(q.size(), pair.size() + 1));
    if (pair.substr(0, pair.find('=')) != name || pair.find('=') == std::string_view::npos)
      continue;
    std::string_view value = pair.substr(pair.find('=') + 1);
    int64_t n = fallback;
    std::from_chars(value.data(), value.data() + value.size(), n);
    return n;
  }
  return fallback;
}

void text(AsyncResponse& res, int status, std::string body) {
  res.response().set_status(status);
  res.response().set_content_type("text/plain");
  res.response().set_body(body);
  res.respond();
}

// Echoes the request body as it arrives: each piece is written before the next is read.
Task echo(const Request&, AsyncResponse res) {
  res.response().set_content_type("application/octet-stream");
  for (;;) {
    peregrine::BodyPiece piece = co_await res.read();
    if (piece.cancelled) co_return;
    if (!piece.bytes.empty() && co_await res.write(piece.bytes) != IoStatus::kOk) co_return;
    if (piece.last) break;
  }
  res.finish();
}

// `mb` MiB of a repeating pattern, written as fast as the client takes them.
Task big(const Request& request, AsyncResponse res) {
  int64_t mb = query_int(request, "mb", 1);
  std::string block(64 * 1024, '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>('a' + i % 26);
  res.response().set_content_type("application/octet-stream");
  if (!res.start(mb * 1024 * 1024)) co_return;
  for (int64_t i = 0; i < mb * 16; ++i)
    if (co_await res.write(block) != IoStatus::kOk) co_return;
  res.finish();
}

// Waits up to `ms`, answering "waited" then; a client that leaves first is counted.
Task wait(const Request& request, AsyncResponse res) {
  int64_t ms = query_int(request, "ms", 30000);
  if (!co_await res.sleep(std::chrono::milliseconds(ms))) {
    cancelled_waits.fetch_add(1);
    co_return;
  }
  text(res, 200, "waited\n");
}

// Coroutines awaiting coroutines (Async): `steps` sleeps of `ms` each, in a helper coroutine
// that returns how many it completed; "steps=N" once all are done. A client that leaves
// cancels the sleep the innermost coroutine is in; the count says so.
peregrine::Async<int> sleep_steps(AsyncResponse& res, int steps, int64_t ms) {
  for (int i = 0; i < steps; ++i)
    if (!co_await res.sleep(std::chrono::milliseconds(ms))) co_return i;
  co_return steps;
}

peregrine::Async<std::string> describe_steps(AsyncResponse& res, int steps, int64_t ms) {
  int done = co_await sleep_steps(res, steps, ms);
  if (done < steps) throw std::runtime_error("cancelled after " + std::to_string(done));
  co_return "steps=" + std::to_string(done) + "\n";
}

Task compose(const Request& request, AsyncResponse res) {
  const int steps = static_cast<int>(query_int(request, "steps", 3));
  const int64_t ms = query_int(request, "ms", 20);
  try {
    std::string body = co_await describe_steps(res, steps, ms);
    text(res, 200, body);
  } catch (const std::runtime_error&) {
    cancelled_waits.fetch_add(1);
  }
}

// The same body count in callback style: pieces paused and resumed from a timer.
void callback_count(const Request&, AsyncResponse res) {
  auto total = std::make_shared<size_t>(0);
  res.on_cancel([] { cancelled_waits.fetch_add(1); });
  res.on_body([res, total](const peregrine::BodyPiece& piece) mutable {
    *total += piece.bytes.size();
    if (piece.last) {
      text(res, 200, "bytes=" + std::to_string(*total) + "\n");
      return true;
    }
    // Pause, and take the next piece a millisecond later.
    res.worker().after(1ms, [res]() mutable { res.resume_body(); });
    return false;
  });
}

// Streams `n` lines, one per `ms`, in callback style with a repeating timer.
void ticks(const Request& request, AsyncResponse res) {
  int64_t n = query_int(request, "n", 3);
  int64_t ms = query_int(request, "ms", 20);
  res.response().set_content_type("text/plain");
  auto count = std::make_shared<int64_t>(0);
  auto timer = std::make_shared<peregrine::Worker::TimerId>(0);
  *timer = res.worker().every(std::chrono::milliseconds(ms), [res, count, n, timer]() mutable {
    if (res.done()) {  // cancelled: stop the timer (it also drops our copy of res)
      peregrine::this_worker()->cancel(*timer);
      return;
    }
    res.send("tick " + std::to_string(++*count) + "\n");
    if (*count == n) {
      res.finish();
      peregrine::this_worker()->cancel(*timer);
    }
  });
}

// Timers: once, repeating (cancelled by itself after 5 runs), and one cancelled before it runs.
void timers(const Request&, AsyncResponse res) {
  struct State {
    int once = 0, every = 0, cancelled = 0, soon = 0;
    peregrine::Worker::TimerId repeating = 0;
  };
  auto state = std::make_shared<State>();
  peregrine::Worker& w = res.worker();
  w.after(0ms, [state] { ++state->soon; });
  w.after(30ms, [state] { ++state->once; });
  auto doomed = w.after(20ms, [state] { ++state->cancelled; });
  bool cancelled = w.cancel(doomed);
  bool twice = w.cancel(doomed);
  state->repeating = w.every(5ms, [state] {
    if (++state->every == 5) peregrine::this_worker()->cancel(state->repeating);
  });
  // Answer once the repeating timer has stopped itself and the once-timer ran (a loaded machine
  // may run them late, never early or out of order), or after 5 s with what happened.
  auto waited = std::make_shared<int>(0);
  auto check = std::make_shared<peregrine::Worker::TimerId>(0);
  *check = w.every(10ms, [res, state, cancelled, twice, waited, check]() mutable {
    if ((state->every < 5 || state->once < 1) && ++*waited < 500) return;
    peregrine::this_worker()->cancel(*check);
    text(res, 200,
         "soon=" + std::to_string(state->soon) + " once=" + std::to_string(state->once) +
             " every=" + std::to_string(state->every) + " cancelled=" +
             std::to_string(state->cancelled) + " cancel=" + (cancelled ? "true" : "false") +
             " again=" + (twice ? "true" : "false") + "\n");
  });
}

// post_all: every worker adds its id; the request's own worker polls until all have.
void post_all(const Request&, AsyncResponse res) {
  struct Seen {
    std::mutex mutex;
    std::set<int> ids;
  };
  auto seen = std::make_shared<Seen>();
  res.worker().post_all([seen] {
    std::lock_guard lock(seen->mutex);
    seen->ids.insert(peregrine::this_worker()->id());
  });
  auto timer = std::make_shared<peregrine::Worker::TimerId>(0);
  *timer = res.worker().every(5ms, [res, seen, timer]() mutable {
    std::string ids;
    {
      std::lock_guard lock(seen->mutex);
      if (static_cast<int>(seen->ids.size()) < res.worker().count() && !res.done()) return;
      for (int id : seen->ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    }
    peregrine::this_worker()->cancel(*timer);
    text(res, 200, "workers=" + std::to_string(res.worker().count()) + " seen=" + ids + "\n");
  });
}

// 101 Switching Protocols, then an echo of the connection's raw bytes until the client closes its
// sending side: what the WebSocket endpoints build on.
void upgrade(const Request& request, AsyncResponse res) {
  if (!request.upgrade) return text(res, 426, "upgrade required\n");
  res.response().set_status(101);
  res.response().add_header("Upgrade", "echo");
  res.response().add_header("Connection", "Upgrade");
  if (res.start()) echo(request, std::move(res));  // the tunnel's bytes: the same loop
}

// A handler that forgets to answer: the server answers 500 for it.
void forgetful(const Request&, AsyncResponse) {}

class AsyncRoutes final : public peregrine::AsyncHandler {
 public:
  void handle(const Request& request, AsyncResponse res) override {
    std::string_view p = request.path;
    if (p == "/async/echo") return (void)echo(request, std::move(res));
    if (p == "/async/big") return (void)big(request, std::move(res));
    if (p == "/async/wait") return (void)wait(request, std::move(res));
    if (p == "/async/compose") return (void)compose(request, std::move(res));
    if (p == "/async/callback") return callback_count(request, std::move(res));
    if (p == "/async/ticks") return ticks(request, std::move(res));
    if (p == "/async/timers") return timers(request, std::move(res));
    if (p == "/async/post_all") return post_all(request, std::move(res));
    if (p == "/async/forget") return forgetful(request, std::move(res));
    if (p == "/async/upgrade") return upgrade(request, std::move(res));
    if (p == "/async/stats")
      return text(res, 200, "cancelled=" + std::to_string(cancelled_waits.load()) + "\n");
    text(res, 404, "no such async route\n");
  }
};

class Greeter final : public peregrine::Handler {
 public:
  explicit Greeter(std::string text) : text_(std::move(text)) {}
  void handle(const Request&, Response& response) override {
    response.set_content_type("text/plain");
    response.set_body(text_);
  }

 private:
  std::string text_;
};

// One instance per worker (and per reload): its number says which factory call made it.
std::shared_ptr<peregrine::Handler> counted_factory() {
  int n = factory_calls.fetch_add(1) + 1;
  return std::make_shared<Greeter>("instance " + std::to_string(n) + "\n");
}

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  auto options = examples::apply_command_line(server, argc, argv);
  server.register_handler("hello", [] { return std::make_shared<Greeter>("hello\n"); })
      .register_handler("counted", counted_factory)
      .register_handler("bye", [] { return std::make_shared<Greeter>("bye\n"); })
      .register_async_handler("async", [] { return std::make_shared<AsyncRoutes>(); });
  if (options.count("--config")) {
    server.config_file(options["--config"]);  // its listen addresses replace the command line's
  } else {
    server.route_factory("/counted", counted_factory)
        .route_async_factory("/async/", [] { return std::make_shared<AsyncRoutes>(); })
        .route_async("/lambda",
                     [](const Request& request, AsyncResponse res) {
                       text(res, 200, "lambda " + std::string(request.path) + "\n");
                     })
        .route("/", std::make_shared<Greeter>("sync\n"));
  }
  return server.run();
}
