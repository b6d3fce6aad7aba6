// The error log: leveled lines to stderr or a file, safe to call from any thread.
//
// While a server runs (start_writer() .. stop_writer()), write() only formats the line and copies
// it into a bounded in-memory ring; one writer thread does the write(2). A log file on a slow
// disk, or a stderr pipe nobody drains, therefore never stalls a worker: when the ring is full the
// line is dropped and counted, and the count is logged once the writer catches up. Outside that
// window (start-up, shutdown, tools) each line is written directly.
//
// The log's descriptor number never changes once opened: open() and reopen() dup2 the new file
// onto it, so a writer holding the number can never write into a socket that accept4 handed the
// same number in the meantime.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>
#include <string_view>

namespace peregrine {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

}  // namespace peregrine

namespace peregrine::log {

// Points the log at `target` ("stderr", "stdout" or a path). Returns false with `error` set when
// the file cannot be opened (the previous target stays in use).
bool open(const std::string& target, std::string* error);
// Re-opens the current file (SIGUSR1, after rotation).
void reopen();
void set_level(LogLevel level);
bool enabled(LogLevel level);

// Starts the writer thread (idempotent). Lines written after this never block the caller.
void start_writer();
// Writes what is queued (waiting at most `timeout_ms` for a blocked target) and stops the
// thread; later lines are written directly again. Reports lines dropped meanwhile.
void stop_writer(int timeout_ms = 2000);
// Lines dropped because the ring was full, since start.
uint64_t dropped_lines();

void write(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

#define PG_LOG(level, ...)                                                             \
  do {                                                                                 \
    if (::peregrine::log::enabled(level)) ::peregrine::log::write(level, __VA_ARGS__); \
  } while (0)
#define LOG_DEBUG(...) PG_LOG(::peregrine::LogLevel::kDebug, __VA_ARGS__)
#define LOG_INFO(...) PG_LOG(::peregrine::LogLevel::kInfo, __VA_ARGS__)
#define LOG_WARN(...) PG_LOG(::peregrine::LogLevel::kWarn, __VA_ARGS__)
#define LOG_ERROR(...) PG_LOG(::peregrine::LogLevel::kError, __VA_ARGS__)

}  // namespace peregrine::log
