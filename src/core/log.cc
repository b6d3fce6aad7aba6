#include "core/log.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

namespace peregrine::log {
namespace {

std::atomic<int> g_fd{STDERR_FILENO};
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_open_mutex;  // serializes open/reopen, never taken by write()
std::string g_target = "stderr";

int open_target(const std::string& target) {
  if (target.empty() || target == "stderr") return STDERR_FILENO;
  if (target == "stdout") return STDOUT_FILENO;
  return ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

void replace_fd(int fd) {
  int old = g_fd.exchange(fd);
  // A concurrent writer may still hold `old` for one write; closing it then fails harmlessly
  // (EBADF) rather than writing elsewhere, because descriptors are not reused until the next open.
  if (old > STDERR_FILENO) ::close(old);
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

}  // namespace

bool open(const std::string& target, std::string* error) {
  std::lock_guard lock(g_open_mutex);
  int fd = open_target(target);
  if (fd < 0) {
    if (error) *error = target + ": " + std::strerror(errno);
    return false;
  }
  g_target = target;
  replace_fd(fd);
  return true;
}

void reopen() {
  std::lock_guard lock(g_open_mutex);
  int fd = open_target(g_target);
  if (fd >= 0) replace_fd(fd);
}

void set_level(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void write(LogLevel level, const char* format, ...) {
  char line[2048];
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm parts;
  gmtime_r(&now.tv_sec, &parts);
  int n = std::snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ [%s] ",
                        parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
                        parts.tm_min, parts.tm_sec, now.tv_nsec / 1000000, level_name(level));
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + n, sizeof line - n - 1, format, args);
  va_end(args);
  size_t len = n + (m < 0 ? 0 : std::min<size_t>(m, sizeof line - n - 2));
  line[len++] = '\n';
  ssize_t ignored = ::write(g_fd.load(std::memory_order_relaxed), line, len);
  (void)ignored;
}

}  // namespace peregrine::log
