// The error log: leveled lines to stderr or a file, safe to call from any thread. Writes are
// rare (errors, state changes), so each line is one write(2) with O_APPEND and no buffering.
#pragma once

#include <cstdarg>
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
