#include "core/log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

#include "core/log_tap.h"

namespace peregrine::log {
namespace {

// Enough for a burst of ~1000 typical lines; a worker that finds it full drops its line rather
// than wait for the disk.
constexpr size_t kRingBytes = 256 * 1024;
constexpr size_t kMaxLine = 2048;

// The descriptor lines go to. Before the first open() of a file it is stderr itself; once a file
// is opened it is a private number that stays the same for the life of the process (later files
// are dup2'ed onto it), so no thread can ever hold a stale number that accept4 has reused.
std::atomic<int> g_fd{STDERR_FILENO};
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_open_mutex;  // serializes open/reopen, never taken by write()
std::string g_target = "stderr";

std::atomic<bool> g_async{false};
std::atomic<uint64_t> g_dropped{0};
// Set when stop_writer() gave up on a target that does not drain: later direct writes then
// try once without waiting, so shutdown cannot hang on a full pipe.
std::atomic<bool> g_stuck{false};

struct Writer {
  std::mutex mutex;
  std::condition_variable wake;
  std::unique_ptr<char[]> ring;
  size_t head = 0;  // first queued byte
  size_t size = 0;  // queued bytes
  bool idle = false;
  bool stop = false;
  std::chrono::steady_clock::time_point stop_deadline;
  std::thread thread;
};
Writer g_writer;

int open_target(const std::string& target) {
  if (target.empty() || target == "stderr") return STDERR_FILENO;
  if (target == "stdout") return STDOUT_FILENO;
  return ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

// Makes g_fd refer to what `fd` refers to, then closes `fd` if it was a temporary.
void install(int fd) {
  int current = g_fd.load();
  if (current > STDERR_FILENO) {
    // The number stays valid throughout: dup2 swaps the file under it atomically.
    ::dup2(fd, current);
    if (fd > STDERR_FILENO) ::close(fd);
    return;
  }
  if (fd <= STDERR_FILENO) {
    g_fd.store(fd);  // stdout/stderr are never closed, so switching between them is safe
    return;
  }
  // First file: publish its number. The previous number (a standard stream) stays open.
  g_fd.store(fd);
}

size_t count_lines(const char* data, size_t len) {
  return static_cast<size_t>(std::count(data, data + len, '\n'));
}

// Writes all of `data` unless `fd` stops draining. A pipe or socket is written at most PIPE_BUF
// bytes at a time after poll() says there is room, so the writer never sleeps inside write(2)
// and can notice a stop. Returns the bytes not written (dropped).
size_t write_all(int fd, const char* data, size_t len, bool wait) {
  struct stat st;
  bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  while (len > 0) {
    size_t chunk = len;
    if (!regular) {
      for (;;) {
        pollfd p{fd, POLLOUT, 0};
        int timeout = 100;
        if (!wait) {
          timeout = 0;
        } else {
          std::lock_guard lock(g_writer.mutex);
          if (g_writer.stop) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                g_writer.stop_deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return len;
            timeout = static_cast<int>(std::min<int64_t>(left.count(), 100));
          }
        }
        int ready = ::poll(&p, 1, timeout);
        if (ready > 0) break;
        if (ready < 0 && errno != EINTR) return len;
        if (ready == 0 && !wait) return len;
      }
      // Whole lines only, so another process sharing the pipe (a binary upgrade) cannot split
      // one of ours.
      chunk = std::min<size_t>(len, PIPE_BUF);
      if (chunk < len) {
        const void* nl = memrchr(data, '\n', chunk);
        if (nl) chunk = static_cast<size_t>(static_cast<const char*>(nl) - data) + 1;
      }
    }
    ssize_t n = ::write(fd, data, chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return len;  // disk full, reader gone: these lines are lost
    data += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

int format_prefix(char* line, size_t size, LogLevel level);

void write_direct(const char* line, size_t len) {
  int fd = g_fd.load(std::memory_order_relaxed);
  if (g_stuck.load(std::memory_order_relaxed)) {
    write_all(fd, line, len, false);
    return;
  }
  ssize_t ignored = ::write(fd, line, len);  // as any program writing to stderr would
  (void)ignored;
}

void report_dropped(uint64_t dropped, uint64_t* reported, bool wait) {
  if (dropped == *reported) return;
  char line[256];
  int n = format_prefix(line, sizeof line, LogLevel::kWarn);
  n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                     "error log: %llu line(s) dropped because the log could not keep up\n",
                     static_cast<unsigned long long>(dropped - *reported));
  if (write_all(g_fd.load(), line, static_cast<size_t>(n), wait) == 0) *reported = dropped;
}

uint64_t g_reported = 0;  // drops already reported; touched by the writer or, when none, main

void run_writer() {
  auto out = std::make_unique<char[]>(64 * 1024);
  std::unique_lock lock(g_writer.mutex);
  for (;;) {
    g_writer.idle = true;
    g_writer.wake.wait(lock, [] { return g_writer.size > 0 || g_writer.stop; });
    g_writer.idle = false;
    if (g_writer.size == 0) break;  // stopping and drained
    size_t n = std::min<size_t>(g_writer.size, 64 * 1024);
    size_t first = std::min(n, kRingBytes - g_writer.head);
    std::memcpy(out.get(), g_writer.ring.get() + g_writer.head, first);
    std::memcpy(out.get() + first, g_writer.ring.get(), n - first);
    g_writer.head = (g_writer.head + n) % kRingBytes;
    g_writer.size -= n;
    lock.unlock();
    size_t lost = write_all(g_fd.load(), out.get(), n, true);
    if (lost != 0) {
      g_dropped.fetch_add(count_lines(out.get() + (n - lost), lost));
    } else {
      report_dropped(g_dropped.load(), &g_reported, true);
    }
    lock.lock();
    if (lost != 0 && g_writer.stop) {
      // The target did not drain before the deadline: what is still queued is lost too.
      size_t first_part = std::min(g_writer.size, kRingBytes - g_writer.head);
      uint64_t lines = count_lines(g_writer.ring.get() + g_writer.head, first_part) +
                       count_lines(g_writer.ring.get(), g_writer.size - first_part);
      g_dropped.fetch_add(lines);
      g_writer.size = 0;
      g_stuck.store(true);
      break;
    }
  }
}

bool enqueue(const char* line, size_t len) {
  bool wake;
  {
    std::lock_guard lock(g_writer.mutex);
    if (!g_writer.thread.joinable() || g_writer.stop) return false;
    if (g_writer.size + len > kRingBytes) {
      g_dropped.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    size_t tail = (g_writer.head + g_writer.size) % kRingBytes;
    size_t first = std::min(len, kRingBytes - tail);
    std::memcpy(g_writer.ring.get() + tail, line, first);
    std::memcpy(g_writer.ring.get(), line + first, len - first);
    g_writer.size += len;
    wake = g_writer.idle;
  }
  if (wake) g_writer.wake.notify_one();
  return true;
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

int format_prefix(char* line, size_t size, LogLevel level) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm parts;
  gmtime_r(&now.tv_sec, &parts);
  return std::snprintf(line, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ [%s] ",
                       parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
                       parts.tm_min, parts.tm_sec, now.tv_nsec / 1000000, level_name(level));
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
  install(fd);
  g_stuck.store(false);
  return true;
}

void reopen() {
  std::lock_guard lock(g_open_mutex);
  if (g_fd.load() <= STDERR_FILENO) return;  // a standard stream: nothing to reopen
  int fd = open_target(g_target);
  if (fd >= 0) install(fd);
}

void set_level(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void start_writer() {
  std::lock_guard lock(g_writer.mutex);
  if (g_writer.thread.joinable()) return;
  if (!g_writer.ring) g_writer.ring = std::make_unique<char[]>(kRingBytes);
  g_writer.stop = false;
  g_writer.thread = std::thread(run_writer);
  g_async.store(true, std::memory_order_release);
}

void stop_writer(int timeout_ms) {
  {
    std::lock_guard lock(g_writer.mutex);
    if (!g_writer.thread.joinable()) return;
    g_writer.stop = true;
    g_writer.stop_deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  g_writer.wake.notify_one();
  g_writer.thread.join();
  {
    std::lock_guard lock(g_writer.mutex);
    g_writer.thread = std::thread();
    g_writer.size = 0;
    g_writer.head = 0;
  }
  g_async.store(false, std::memory_order_release);
  report_dropped(g_dropped.load(), &g_reported, !g_stuck.load());
}

uint64_t dropped_lines() {
  return g_dropped.load(std::memory_order_relaxed);
}

void write(LogLevel level, const char* format, ...) {
  char line[kMaxLine];
  int n = format_prefix(line, sizeof line, level);
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + n, sizeof line - n - 1, format, args);
  va_end(args);
  size_t len = n + (m < 0 ? 0 : std::min<size_t>(m, sizeof line - n - 2));
  line[len++] = '\n';
  if (log_tap::active()) log_tap::offer(log_tap::kError, {line, len});
  if (g_async.load(std::memory_order_acquire) && enqueue(line, len)) return;
  write_direct(line, len);
}

}  // namespace peregrine::log
