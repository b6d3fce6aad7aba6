// Cross-check of the HTTP/2 session with another implementation: Debian's python3-h2 as the
// client (tests/unit/http2/session_peer.py) over a socketpair, our Session as the server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "http2/session/session.h"

namespace peregrine::http2::session {
namespace {

struct Server : Events {
  struct Exchange {
    std::string path;
    std::string body;  // the response's, pulled by read_body
    uint64_t received = 0;
  };
  Session* session = nullptr;
  std::map<int32_t, Exchange> exchanges;
  std::vector<int32_t> to_answer;
  bool goaway = false;

  bool on_field(Stream& s, std::string_view name, std::string_view value, bool) override {
    if (name == ":path") exchanges[s.id].path = value;
    return true;
  }
  void on_headers(Stream& s, bool end_stream, bool) override {
    if (end_stream) to_answer.push_back(s.id);
  }
  void on_data(Stream& s, std::string_view bytes, bool end_stream) override {
    exchanges[s.id].received += bytes.size();
    session->consume(s.id, bytes.size());
    if (end_stream) to_answer.push_back(s.id);
  }
  void on_stream_close(Stream& s, ErrorCode) override { exchanges.erase(s.id); }
  void read_body(Stream& s, std::string& out, size_t max, bool& last) override {
    std::string& body = exchanges[s.id].body;
    const size_t n = std::min(max, body.size());
    out.append(body, 0, n);
    body.erase(0, n);
    last = body.empty();
  }
  void on_goaway(int32_t, ErrorCode) override { goaway = true; }

  void answer() {
    for (int32_t id : to_answer) {
      Exchange& e = exchanges[id];
      if (e.path == "/big") {
        e.body.assign(300000, 'x');
      } else if (e.path == "/echo") {
        e.body = "got " + std::to_string(e.received);
      } else {
        e.body = "hello " + e.path;
      }
      Session::Header head[] = {{":status", "200"}, {"content-type", "text/plain"}};
      session->submit_response(id, head, true);
    }
    to_answer.clear();
  }
};

TEST(SessionPeer, CrossChecksWithPythonH2) {
  if (access("/usr/bin/python3", X_OK) != 0 ||
      std::system("/usr/bin/python3 -c 'import h2' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-h2 is not installed";
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(fds[1], 0);
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/usr/bin/python3", "python3", PEREGRINE_SOURCE_DIR "/tests/unit/http2/session_peer.py",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  const int fd = fds[0];
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  Server server;
  Session session(server, Options{});
  server.session = &session;
  std::string pending;
  bool peer_closed = false;
  char buffer[16384];
  while (!peer_closed) {
    if (pending.empty() && session.want_write()) session.produce(pending);
    pollfd p{fd, static_cast<short>(POLLIN | (pending.empty() ? 0 : POLLOUT)), 0};
    ASSERT_GT(poll(&p, 1, 10000), 0) << "the exchange stalled";
    if (p.revents & POLLOUT) {
      const ssize_t n = write(fd, pending.data(), pending.size());
      if (n > 0) pending.erase(0, static_cast<size_t>(n));
    }
    if (p.revents & (POLLIN | POLLHUP)) {
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) {
        peer_closed = true;
        break;
      }
      ASSERT_TRUE(session.receive({buffer, static_cast<size_t>(n)}))
          << "connection error " << static_cast<int>(session.error());
      server.answer();
    }
  }
  close(fd);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "python3-h2 failed (its stderr)";
  EXPECT_TRUE(server.goaway);
  EXPECT_GE(session.completed(), 3u);
}

}  // namespace
}  // namespace peregrine::http2::session
