// A coroutine handler that waits on a timer and streams its answer with back-pressure:
//
//   GET /countdown?from=N&ms=M   → N lines "N", "N-1", ... "liftoff", one every M ms (chunked)
//
// A client that goes away ends the coroutine at its next co_await (the sleep returns false),
// and the server logs nothing: that is normal.
//
// Usage: stream [--listen ADDR] [--workers N]
#include <charconv>
#include <string>

#include "../common/command_line.h"
#include "peregrine/async.h"
#include "peregrine/server.h"

namespace {

int query_int(std::string_view query, std::string_view name, int fallback, int max) {
  while (!query.empty()) {
    std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    int n = fallback;
    auto [end, ec] = std::from_chars(pair.data() + eq + 1, pair.data() + pair.size(), n);
    if (ec != std::errc() || n < 0) return fallback;
    return std::min(n, max);
  }
  return fallback;
}

// The request's fields are read before the first co_await: the Request lives as long as the
// response, but copying what a coroutine needs keeps it obviously safe.
peregrine::Task countdown(const peregrine::Request& request, peregrine::AsyncResponse res) {
  int from = query_int(request.query, "from", 5, 1000);
  int ms = query_int(request.query, "ms", 1000, 60000);
  res.response().set_content_type("text/plain; charset=utf-8");
  res.response().add_header("Cache-Control", "no-store");
  for (int i = from; i > 0; --i) {
    // write() waits while the client is slow: memory stays bounded whatever it streams.
    if (co_await res.write(std::to_string(i) + "\n") != peregrine::IoStatus::kOk) co_return;
    if (!co_await res.sleep(std::chrono::milliseconds(ms))) co_return;  // the client left
  }
  if (co_await res.write("liftoff\n") != peregrine::IoStatus::kOk) co_return;
  res.finish();
}

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  examples::apply_command_line(server, argc, argv);
  server.route_async("/countdown", countdown);
  return server.run();
}
