// The floor of issue 19: the least an epoll server can spend per request. One thread, one
// level-triggered epoll set; every read that returns bytes is answered with the same canned
// response, without parsing (so: no pipelining, requests of one read each, as wrk sends them).
// Not a server: a yardstick for bench/run.py's "µs per request" of a small response.
//
//   cmake --build --preset release --target canned-epoll
//   build/release/canned-epoll [PORT [BODY_FILE]]   # 127.0.0.1, default 8081
//
// BODY_FILE: its bytes are the body of every response (read once at start), so the reply has the
// size of the file a bench scenario asks for; without it the body is "Hello, World!".
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace {

// Built before the loop: the loop itself only sends these bytes.
std::string make_reply(const char* body_file) {
  std::string body = "Hello, World!";
  if (body_file != nullptr) {
    std::ifstream in(body_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "canned-epoll: cannot read %s\n", body_file);
      std::exit(1);
    }
    body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 4096) != 0) {
    std::perror("canned-epoll: bind/listen");
    std::exit(1);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string reply = make_reply(argc > 2 ? argv[2] : nullptr);
  const int listener = listen_on(argc > 1 ? std::atoi(argv[1]) : 8081);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {.fd = listener}};
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  std::printf("canned-epoll listening on 127.0.0.1:%s\n", argc > 1 ? argv[1] : "8081");
  std::fflush(stdout);
  epoll_event events[512];
  char buffer[16384];
  for (;;) {
    int n = epoll_wait(ep, events, 512, -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener) {
        int c;
        while ((c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{EPOLLIN, {.fd = c}};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        }
        continue;
      }
      ssize_t got = recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) {
        close(fd);  // also leaves the epoll set
        continue;
      }
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) close(fd);
    }
  }
}
