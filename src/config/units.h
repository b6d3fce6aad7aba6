// Durations and sizes as written in the configuration: "500ms", "20s", "5m", "1h"; "16k",
// "1m", "1g" (powers of 1024). Pure functions, no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace peregrine::config {

// "500ms" | "20s" | "5m" | "1h" | "20" (seconds). No sign, no spaces, no fractions.
bool parse_duration(std::string_view text, std::chrono::milliseconds* out);
// "16384" | "16k" | "1m" | "1g" (case-insensitive suffix; 1k = 1024).
bool parse_size(std::string_view text, uint64_t* out);

// The shortest exact spelling: 1500ms -> "1500ms", 20000ms -> "20s", 300000ms -> "5m".
std::string format_duration(std::chrono::milliseconds value);
// 16384 -> "16k", 1048576 -> "1m", 1000 -> "1000".
std::string format_size(uint64_t bytes);

inline constexpr std::string_view kDurationForms =
    "write a duration as \"500ms\", \"20s\", \"5m\", \"1h\" or an integer number of seconds";
inline constexpr std::string_view kSizeForms =
    "write a size as an integer number of bytes or \"16k\", \"1m\", \"1g\" (powers of 1024)";

}  // namespace peregrine::config
