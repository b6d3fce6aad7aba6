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
#include "peregrine/response.h"

namespace peregrine::server {

// A quoted field's contents in the combined format and in custom formats: quotes, backslashes
// and bytes outside printable ASCII as \xHH, so a hostile User-Agent cannot forge a log line.
void append_escaped(std::string& out, std::string_view text);

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

// ---- Custom formats (access_log_format with $variables; access_log_format.cc) ----
// What a custom format may ask beyond the request. Filled by the connection only for sites
// with a custom format, so the presets cost nothing more.
struct LogContext {
  uint64_t bytes_sent = 0;      // head + body as written
  uint64_t request_length = 0;  // head + body as received
  int64_t request_time_ms = 0;  // from the head's arrival to the log line
  std::string_view tls_version;
  std::string_view tls_cipher;
  uint64_t connection = 0;  // this worker's serial number of the connection
  uint32_t connection_requests = 0;
  const Response* response = nullptr;  // for $sent_http_NAME, when the response is at hand
};

// One worker's buffer for one sink.
class AccessLogBuffer {
 public:
  AccessLogBuffer(AccessLogWriter& writer, int sink, config::AccessLogFormat format,
                  const config::LogFormat* custom = nullptr)
      : writer_(writer), sink_(sink), format_(format), custom_(custom) {}
  ~AccessLogBuffer() { flush(); }

  // `tls_version`/`tls_cipher` non-empty ([tls] access_log_tls on a TLS connection): JSON lines
  // get "tls_version" and "tls_cipher", combined lines end with "VERSION CIPHER" in quotes.
  void log(const Request& request, int status, uint64_t body_bytes, time_t now,
           std::string_view tls_version = {}, std::string_view tls_cipher = {});
  void flush() {
    if (!buffer_.empty()) writer_.submit(sink_, buffer_);
  }

  // Non-null when this site logs with a custom format: the caller then fills a LogContext and
  // calls log_custom instead of log.
  const config::LogFormat* custom() const { return custom_; }
  void log_custom(const Request& request, int status, uint64_t body_bytes, time_t now,
                  const LogContext& context);

 private:
  static constexpr size_t kFlushAt = 32 * 1024;
  AccessLogWriter& writer_;
  int sink_;
  config::AccessLogFormat format_;
  const config::LogFormat* custom_;  // lives in the route table's config snapshot
  std::string buffer_;
  time_t formatted_second_ = -1;
  char time_text_[40];
  size_t time_len_ = 0;
  time_t custom_second_ = -1;  // $time_local and $time_iso8601, formatted once a second
  char time_local_[32];
  char time_iso_[32];
};

}  // namespace peregrine::server
