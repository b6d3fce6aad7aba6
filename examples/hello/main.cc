// The "hello world" of the Swoole post, in C++ on libperegrine: every request is answered
// "Hello world". Usage: hello [--listen ADDR] [--workers N]

#include "../common/command_line.h"
#include "peregrine/server.h"

int main(int argc, char** argv) {
  peregrine::Server server;
  examples::apply_command_line(server, argc, argv);
  server.route("/", [](const peregrine::Request&, peregrine::Response& response) {
    response.set_content_type("text/plain");
    response.set_body("Hello world");
  });
  return server.run();
}
