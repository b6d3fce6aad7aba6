// The "hello world" of the Swoole post, in C++ on libperegrine: every request is answered
// "Hello world". Usage: hello [--listen ADDR] [--workers N]
//
// The same answer three ways, so that their costs can be compared (bench/library_cost.py):
// /callback and /coroutine through the asynchronous API (peregrine/async.h), everything else
// through a synchronous handler.

#include "../common/command_line.h"
#include "peregrine/async.h"
#include "peregrine/server.h"

namespace {

void answer(peregrine::Response& response) {
  response.set_content_type("text/plain");
  response.set_body("Hello world");
}

peregrine::Task hello_coroutine(const peregrine::Request&, peregrine::AsyncResponse res) {
  answer(res.response());
  res.respond();
  co_return;
}

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  examples::apply_command_line(server, argc, argv);
  server
      .route_async("/callback",
                   [](const peregrine::Request&, peregrine::AsyncResponse res) {
                     answer(res.response());
                     res.respond();
                   })
      .route_async("/coroutine", hello_coroutine)
      .route("/",
             [](const peregrine::Request&, peregrine::Response& response) { answer(response); });
  return server.run();
}
