#include "config/units.h"

#include <limits>

namespace peregrine::config {

namespace {

// Leading decimal digits of `text` into *value; returns how many were consumed (0 on overflow).
size_t parse_digits(std::string_view text, uint64_t* value) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) return 0;
    v = v * 10 + digit;
  }
  *value = v;
  return i;
}

bool checked_multiply(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

}  // namespace

bool parse_duration(std::string_view text, std::chrono::milliseconds* out) {
  uint64_t number = 0;
  size_t n = parse_digits(text, &number);
  if (n == 0) return false;
  std::string_view unit = text.substr(n);
  uint64_t factor = 0;
  if (unit.empty() || unit == "s") {
    factor = 1000;
  } else if (unit == "ms") {
    factor = 1;
  } else if (unit == "m") {
    factor = 60 * 1000;
  } else if (unit == "h") {
    factor = 60 * 60 * 1000;
  } else {
    return false;
  }
  uint64_t ms = 0;
  if (!checked_multiply(number, factor, &ms)) return false;
  if (ms > static_cast<uint64_t>(std::numeric_limits<std::chrono::milliseconds::rep>::max())) {
    return false;
  }
  *out = std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(ms));
  return true;
}

bool parse_size(std::string_view text, uint64_t* out) {
  uint64_t number = 0;
  size_t n = parse_digits(text, &number);
  if (n == 0) return false;
  std::string_view unit = text.substr(n);
  uint64_t factor = 1;
  if (unit.size() == 1) {
    switch (unit[0]) {
      case 'k':
      case 'K':
        factor = uint64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        factor = uint64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        factor = uint64_t{1} << 30;
        break;
      default:
        return false;
    }
  } else if (!unit.empty()) {
    return false;
  }
  return checked_multiply(number, factor, out);
}

std::string format_duration(std::chrono::milliseconds value) {
  auto ms = value.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string format_size(uint64_t bytes) {
  if (bytes != 0 && bytes % (uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + "g";
  if (bytes != 0 && bytes % (uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "m";
  if (bytes != 0 && bytes % (uint64_t{1} << 10) == 0) return std::to_string(bytes >> 10) + "k";
  return std::to_string(bytes);
}

}  // namespace peregrine::config
