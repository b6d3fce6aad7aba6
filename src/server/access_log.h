// Access logging that never stalls serving. Each worker formats lines into its own buffer; full
// buffers (or, once a second, partial ones) are handed to one writer thread that does the
// write(2). If the disk is slow or full, the queue is bounded: lines are dropped and counted,
// never waited for.
#pragma once

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "config/config.h"
#include "peregrine/request.h"

namespace peregrine::server {

class AccessLogWriter {
 public:
  AccessLogWriter();
  ~AccessLogWriter();  // writes what is queued, then stops the thread

  // Returns a sink id for `path` ("stdout", "stderr" or a file), opening it once; -1 on error.
  int open_sink(const std::string& path, std::string* error);
  // Takes the bytes of `buffer` (leaving it empty, capacity kept when possible).
  void submit(int sink, std::string& buffer);
  void reopen_all();  // SIGUSR1
  uint64_t dropped_bytes() const;

 private:
  struct Sink {
    std::string path;
    int fd;
  };
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<int, std::string>> queue_;
  std::vector<std::string> spare_;  // recycled buffers so steady state allocates nothing
  size_t queued_bytes_ = 0;
  uint64_t dropped_bytes_ = 0;
  bool reopen_ = false;
  bool stop_ = false;
  std::vector<Sink> sinks_;
  std::thread thread_;
};

// One worker's buffer for one sink.
class AccessLogBuffer {
 public:
  AccessLogBuffer(AccessLogWriter& writer, int sink, config::AccessLogFormat format)
      : writer_(writer), sink_(sink), format_(format) {}
  ~AccessLogBuffer() { flush(); }

  // `tls_version`/`tls_cipher` non-empty ([tls] access_log_tls on a TLS connection): JSON lines
  // get "tls_version" and "tls_cipher", combined lines end with "VERSION CIPHER" in quotes.
  void log(const Request& request, int status, uint64_t body_bytes, time_t now,
           std::string_view tls_version = {}, std::string_view tls_cipher = {});
  void flush() {
    if (!buffer_.empty()) writer_.submit(sink_, buffer_);
  }

 private:
  static constexpr size_t kFlushAt = 32 * 1024;
  AccessLogWriter& writer_;
  int sink_;
  config::AccessLogFormat format_;
  std::string buffer_;
  time_t formatted_second_ = -1;
  char time_text_[40];
  size_t time_len_ = 0;
};

}  // namespace peregrine::server
