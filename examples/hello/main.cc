// The "hello world" of the Swoole post, in C++ on libperegrine: every request is answered
// "Hello world". Usage: hello [--listen ADDR] [--workers N]
#include <cstdlib>
#include <cstring>

#include "peregrine/server.h"

int main(int argc, char** argv) {
  peregrine::Server server;
  bool listened = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--listen") == 0) {
      server.listen(argv[i + 1]);
      listened = true;
    } else if (std::strcmp(argv[i], "--workers") == 0) {
      server.workers(std::atoi(argv[i + 1]));
    }
  }
  if (!listened) server.listen("127.0.0.1:8080");
  server.route("/", [](const peregrine::Request&, peregrine::Response& response) {
    response.set_content_type("text/plain");
    response.set_body("Hello world");
  });
  return server.run();
}
