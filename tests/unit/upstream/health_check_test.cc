// HealthChecker against a real HTTP peer on loopback: the exact rise/fall counting, timeouts and
// refused connections, driven through the same poller and timer set a worker uses.
#include "upstream/health_check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "event/deferred.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "upstream/group_runtime.h"

namespace peregrine::upstream {
namespace {

// A blocking HTTP server on 127.0.0.1 in its own thread: answers every request with `status`,
// or, when `silent`, reads the request and never answers.
class TinyServer {
 public:
  TinyServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 64), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TinyServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::atomic<int> status{200};
  std::atomic<bool> silent{false};
  std::atomic<int> requests{0};

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string in;
      char buf[1024];
      while (in.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 1000) <= 0) break;
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        last_request_ = in;
      }
      ++requests;
      if (silent) {
        held_.push_back(c);  // keep it open, unanswered
        continue;
      }
      std::string out = "HTTP/1.1 " + std::to_string(status.load()) +
                        " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      ::close(c);
    }
    for (int c : held_) ::close(c);
  }

 public:
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_request_;
  }

 private:
  std::mutex mutex_;
  std::string last_request_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::thread thread_;
};

config::UpstreamServer server_at(uint16_t port) {
  config::UpstreamServer s;
  s.address = "127.0.0.1:" + std::to_string(port);
  auto* in = reinterpret_cast<sockaddr_in*>(&s.addr);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  s.addr_len = sizeof(sockaddr_in);
  return s;
}

class HealthCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { clock_.update(); }

  void make(uint16_t port, int rise, int fall, int timeout_ms = 500) {
    group_config_.name = "g";
    group_config_.servers = {server_at(port)};
    group_config_.health_check.enabled = true;
    group_config_.health_check.path = "/health";
    group_config_.health_check.interval = config::Millis(5);
    group_config_.health_check.timeout = config::Millis(timeout_ms);
    group_config_.health_check.expect_status_min = 200;
    group_config_.health_check.expect_status_max = 299;
    group_config_.health_check.rise = rise;
    group_config_.health_check.fall = fall;
    group_ = std::make_unique<GroupRuntime>(group_config_, *poller_, timers_, clock_, 1);
    checker_ = std::make_unique<HealthChecker>(*group_, *poller_, timers_, clock_);
  }

  void TearDown() override {
    checker_.reset();
    group_.reset();
    event::dispose_pending();
  }

  // Runs the loop until `probes` more probes of server 0 have finished.
  void run_probes(size_t probes) {
    size_t target = checker_->probes_done(0) + probes;
    for (int spins = 0; checker_->probes_done(0) < target; ++spins) {
      ASSERT_LT(spins, 20000) << "probes did not finish";
      clock_.update();
      timers_.run(clock_.monotonic_ms);
      event::ReadyEvent events[16];
      int n = poller_->wait(2, events, 16);
      for (int i = 0; i < n; ++i) events[i].target->on_ready(events[i].readiness);
      event::dispose_pending();
    }
  }

  bool up() const { return group_->upstream().group().probe_up(0); }

  std::unique_ptr<event::Poller> poller_ = event::make_epoll_poller();
  event::TimerSet timers_;
  Clock clock_;
  config::UpstreamGroup group_config_;
  std::unique_ptr<GroupRuntime> group_;
  std::unique_ptr<HealthChecker> checker_;
};

TEST_F(HealthCheckTest, FallAndRiseCountConsecutiveResults) {
  TinyServer server;
  make(server.port(), /*rise=*/2, /*fall=*/3);
  run_probes(2);
  EXPECT_TRUE(up());
  EXPECT_NE(server.last_request().find("GET /health HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(server.last_request().find("Host: 127.0.0.1:" + std::to_string(server.port())),
            std::string::npos);

  server.status = 503;
  run_probes(2);
  EXPECT_TRUE(up()) << "two failures of three";
  server.status = 200;  // a success resets the count
  run_probes(1);
  server.status = 503;
  run_probes(2);
  EXPECT_TRUE(up());
  run_probes(1);
  EXPECT_FALSE(up()) << "three failures in a row";

  server.status = 204;  // in the expected range
  run_probes(1);
  EXPECT_FALSE(up()) << "one success of two";
  run_probes(1);
  EXPECT_TRUE(up());
}

TEST_F(HealthCheckTest, RefusedConnectionsAndTimeoutsAreFailures) {
  uint16_t dead_port;
  {
    TinyServer gone;
    dead_port = gone.port();
  }  // closed: connections are refused now
  make(dead_port, 1, 2);
  run_probes(1);
  EXPECT_TRUE(up());
  run_probes(1);
  EXPECT_FALSE(up());
  checker_.reset();
  group_.reset();

  TinyServer silent;
  silent.silent = true;
  make(silent.port(), 1, 1, /*timeout_ms=*/50);
  run_probes(1);
  EXPECT_FALSE(up()) << "no answer within the timeout";
  silent.silent = false;
  run_probes(1);
  EXPECT_TRUE(up());
}

TEST_F(HealthCheckTest, StatusOutsideTheRangeIsAFailure) {
  TinyServer server;
  server.status = 302;
  make(server.port(), 1, 1);
  run_probes(1);
  EXPECT_FALSE(up());
}

}  // namespace
}  // namespace peregrine::upstream
