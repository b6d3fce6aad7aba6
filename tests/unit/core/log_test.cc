// The error log's two promises: a reopen never leaves a stale descriptor number that a socket
// could take over, and with the writer thread a log that does not drain costs lines, not time.
#include "core/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace peregrine::log {
namespace {

namespace fs = std::filesystem;

size_t count_lines(const fs::path& dir, const std::string& needle) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  }
  return n;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("peregrine-log-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    set_level(LogLevel::kInfo);
  }
  void TearDown() override {
    stop_writer();
    std::string error;
    open("stderr", &error);
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

// Writers, a logrotate-like renamer + reopen, and a thread that keeps creating sockets so that a
// descriptor number closed by a reopen would be handed out again at once. No line may arrive
// in a socket, and every line must be in one of the files.
TEST_F(LogTest, ReopenUnderConcurrentWritesNeverWritesIntoAReusedDescriptor) {
  const fs::path path = dir_ / "error.log";
  std::string error;
  ASSERT_TRUE(open(path.string(), &error)) << error;
  std::atomic<bool> done{false};
  std::atomic<size_t> stray_bytes{0};
  constexpr int kWriters = 3, kLinesEach = 4000;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([w] {
      for (int i = 0; i < kLinesEach; ++i) LOG_INFO("rotation-test writer %d line %d", w, i);
    });
  std::thread sockets([&] {
    while (!done.load()) {
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair) != 0) continue;
      char buffer[4096];
      ssize_t n;
      while ((n = ::read(pair[1], buffer, sizeof buffer)) > 0) stray_bytes += n;
      ::close(pair[0]);
      ::close(pair[1]);
    }
  });
  std::thread rotator([&] {
    for (int i = 0; !done.load(); ++i) {
      fs::rename(path, dir_ / ("error.log." + std::to_string(i)));
      reopen();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  sockets.join();
  rotator.join();
  EXPECT_EQ(stray_bytes.load(), 0u);
  EXPECT_EQ(count_lines(dir_, "rotation-test writer"), size_t{kWriters} * kLinesEach);
}

// A pipe nobody reads: with the writer thread, 20000 lines take no time (most are dropped and
// counted); once the pipe is read again, the count is reported.
TEST_F(LogTest, AFullPipeDropsAndCountsLinesInsteadOfBlocking) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  std::string error;
  ASSERT_TRUE(open("/dev/fd/" + std::to_string(pipe_fds[1]), &error)) << error;
  ::close(pipe_fds[1]);
  start_writer();
  const uint64_t dropped_before = dropped_lines();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) LOG_WARN("filler line %d of a log nobody reads", i);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, std::chrono::seconds(2));
  EXPECT_GT(dropped_lines() - dropped_before, 10000u);

  // The reader keeps reading until the writer has stopped, so stopping does not wait.
  std::atomic<bool> reported{false};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::string got;
    char buffer[65536];
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    while (!done.load()) {
      ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (n <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      got.append(buffer, static_cast<size_t>(n));
      if (got.find("line(s) dropped because the log could not keep up") != std::string::npos)
        reported = true;
    }
  });
  LOG_WARN("the reader is back");
  for (int i = 0; i < 400 && !reported.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(reported.load());
  stop_writer();
  done = true;
  reader.join();
  ::close(pipe_fds[0]);
}

}  // namespace
}  // namespace peregrine::log
