#include "server/access_log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/address_text.h"
#include "core/log.h"
#include "core/log_tap.h"
#include "core/strings.h"
#include "metrics/metrics.h"

namespace peregrine::server {
namespace {

constexpr size_t kMaxQueuedBytes = 64 * 1024 * 1024;

int open_target(const std::string& path) {
  if (path.empty() || path == "stdout") return STDOUT_FILENO;
  if (path == "stderr") return STDERR_FILENO;
  return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

std::string_view protocol_name(const Request& request) {
  if (request.version_major == 2) return "HTTP/2.0";
  return request.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
}

void append_address(std::string& out, const sockaddr* addr) {
  AddressText text(addr);
  out.append(text.ip_length ? text.ip_view() : "-");
}

}  // namespace

void append_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
      out.append("\\x");
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

AccessLogWriter::AccessLogWriter() : thread_([this] { run(); }) {}

AccessLogWriter::~AccessLogWriter() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
  for (Sink& sink : sinks_)
    if (sink.fd > STDERR_FILENO) ::close(sink.fd);
}

int AccessLogWriter::open_sink(const std::string& path, std::string* error) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < sinks_.size(); ++i)
    if (sinks_[i].path == path) return static_cast<int>(i);
  int fd = open_target(path);
  if (fd < 0) {
    if (error) *error = path + ": " + std::strerror(errno);
    return -1;
  }
  sinks_.push_back({path, fd});
  return static_cast<int>(sinks_.size() - 1);
}

void AccessLogWriter::submit(int sink, std::string& buffer) {
  std::string replacement;
  {
    std::lock_guard lock(mutex_);
    if (queued_bytes_ + buffer.size() > kMaxQueuedBytes) {
      dropped_bytes_ += buffer.size();
      metrics::registry().process().access_log_dropped.add(  // under mutex_: one writer at a time
          static_cast<uint64_t>(std::count(buffer.begin(), buffer.end(), '\n')));
      buffer.clear();
      return;
    }
    queued_bytes_ += buffer.size();
    queue_.emplace_back(sink, std::move(buffer));
    if (!spare_.empty()) {
      replacement = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  wake_.notify_one();
  buffer = std::move(replacement);
  buffer.clear();
}

void AccessLogWriter::reopen_all() {
  {
    std::lock_guard lock(mutex_);
    reopen_ = true;
  }
  wake_.notify_one();
}

uint64_t AccessLogWriter::dropped_bytes() const {
  std::lock_guard lock(mutex_);
  return dropped_bytes_;
}

void AccessLogWriter::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || reopen_ || !queue_.empty(); });
    if (reopen_) {
      reopen_ = false;
      for (Sink& sink : sinks_) {
        if (sink.fd <= STDERR_FILENO) continue;
        int fd = open_target(sink.path);
        if (fd < 0) {
          LOG_ERROR("cannot reopen access log %s: %s", sink.path.c_str(), std::strerror(errno));
          continue;
        }
        // Keep the number: only this thread writes to it, but a number that never changes
        // cannot be confused with a client socket accept4 was given meanwhile.
        ::dup2(fd, sink.fd);
        ::close(fd);
      }
    }
    while (!queue_.empty()) {
      auto [sink, bytes] = std::move(queue_.front());
      queue_.pop_front();
      int fd = sinks_[sink].fd;
      lock.unlock();
      if (log_tap::active()) log_tap::offer(log_tap::kAccess, bytes);  // the admin's live tail
      const char* p = bytes.data();
      size_t left = bytes.size();
      while (left > 0) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // disk full or closed: these lines are lost, serving goes on
        p += n;
        left -= static_cast<size_t>(n);
      }
      lock.lock();
      queued_bytes_ -= bytes.size();
      if (spare_.size() < 16 && bytes.capacity() <= 256 * 1024) {
        bytes.clear();
        spare_.push_back(std::move(bytes));
      }
    }
    if (stop_) return;
  }
}

void AccessLogBuffer::log(const Request& request, int status, uint64_t body_bytes, time_t now,
                          std::string_view tls_version, std::string_view tls_cipher) {
  if (now != formatted_second_) {
    formatted_second_ = now;
    tm parts;
    gmtime_r(&now, &parts);
    time_len_ =
        format_ == config::AccessLogFormat::kJson
            ? std::strftime(time_text_, sizeof time_text_, "%Y-%m-%dT%H:%M:%SZ", &parts)
            : std::strftime(time_text_, sizeof time_text_, "%d/%b/%Y:%H:%M:%S +0000", &parts);
  }
  std::string_view referer = request.header("Referer").value_or("");
  std::string_view agent = request.header("User-Agent").value_or("");
  std::string& out = buffer_;
  if (format_ == config::AccessLogFormat::kJson) {
    out.append("{\"time\":\"").append(time_text_, time_len_).append("\",\"remote_addr\":\"");
    append_address(out, request.peer);
    out.append("\",\"method\":");
    append_json_string(out, request.method_text);
    out.append(",\"uri\":");
    append_json_string(out, request.target);
    out.append(",\"protocol\":\"").append(protocol_name(request));
    out.append("\",\"status\":");
    append_decimal(out, static_cast<uint64_t>(status));
    out.append(",\"bytes\":");
    append_decimal(out, body_bytes);
    out.append(",\"host\":");
    append_json_string(out, request.host);
    out.append(",\"referer\":");
    append_json_string(out, referer);
    out.append(",\"user_agent\":");
    append_json_string(out, agent);
    if (!request.remote_user.empty()) {
      out.append(",\"remote_user\":");
      append_json_string(out, request.remote_user);
    }
    if (!tls_version.empty()) {
      out.append(",\"tls_version\":");
      append_json_string(out, tls_version);
      out.append(",\"tls_cipher\":");
      append_json_string(out, tls_cipher);
    }
    out.append("}\n");
  } else {
    append_address(out, request.peer);
    out.append(" - ");
    append_escaped(out, request.remote_user.empty() ? "-" : request.remote_user);  // basic auth
    out.append(" [").append(time_text_, time_len_).append("] \"");
    append_escaped(out, request.method_text);
    out += ' ';
    append_escaped(out, request.target);
    out += ' ';
    out.append(protocol_name(request)).append("\" ");
    append_decimal(out, static_cast<uint64_t>(status));
    out += ' ';
    append_decimal(out, body_bytes);
    out.append(" \"");
    append_escaped(out, referer.empty() ? "-" : referer);
    out.append("\" \"");
    append_escaped(out, agent.empty() ? "-" : agent);
    if (!tls_version.empty()) {
      out.append("\" \"");
      append_escaped(out, tls_version);
      out += ' ';
      append_escaped(out, tls_cipher);
    }
    out.append("\"\n");
  }
  if (out.size() >= kFlushAt) flush();
}

}  // namespace peregrine::server
