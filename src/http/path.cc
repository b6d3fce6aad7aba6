#include "http/path.h"

#include <cstddef>

namespace peregrine::http {
namespace {

// Value of a hex digit, or -1.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Applies the just-completed segment buf[seg_start, len) and returns the new length, or 0 when a
// ".." would climb above the root. buf[0] is always '/', and buf[seg_start - 1] is '/'. For a
// regular segment the length is unchanged (the caller decides whether a '/' follows it); for "."
// and ".." the result ends with '/'.
size_t finish_segment(const char* buf, size_t len, size_t seg_start) {
  const size_t seg_len = len - seg_start;
  const char* seg = buf + seg_start;
  if (seg_len == 1 && seg[0] == '.') return seg_start;  // "/a/." -> "/a/"
  if (seg_len == 2 && seg[0] == '.' && seg[1] == '.') {
    if (seg_start <= 1) return 0;     // "/.." : above the root
    size_t prev = seg_start - 2;      // last byte of the previous segment
    while (buf[prev] != '/') --prev;  // stops at buf[0] at the latest
    return prev + 1;
  }
  return len;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(plus_is_space && text[i] == '+' ? ' ' : text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex_value(text[i + 1]);
    const int lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>((hi << 4) | lo));
    i += 2;
  }
  return out;
}

PathStatus normalize_path(std::string_view raw_path, std::string& out) {
  const size_t n = raw_path.size();
  if (n == 0 || raw_path[0] != '/') {
    out.clear();
    return PathStatus::kBadRequest;
  }
  // Decoding never makes the path longer, so one resize up front (no allocation once the
  // capacity suffices) lets the loop write through a plain pointer.
  out.resize(n);
  char* const buf = out.data();
  const char* const in = raw_path.data();
  buf[0] = '/';
  size_t len = 1;        // bytes of buf in use
  size_t seg_start = 1;  // where the current segment begins in buf
  for (size_t i = 1; i < n; ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= n) return PathStatus::kBadRequest;  // truncated "%X" or "%"
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return PathStatus::kBadRequest;
      c = static_cast<char>((hi << 4) | lo);
      i += 2;
    }
    if (c == '/') {
      if (len == seg_start) continue;  // empty segment: collapse "//"
      const size_t before = len;
      len = finish_segment(buf, len, seg_start);
      if (len == 0) return PathStatus::kBadRequest;
      if (len == before) buf[len++] = '/';  // a regular segment: keep it and its '/'
      seg_start = len;
      continue;
    }
    if (c == '\0') return PathStatus::kBadRequest;
    buf[len++] = c;
  }
  len = finish_segment(buf, len, seg_start);
  if (len == 0) return PathStatus::kBadRequest;
  out.resize(len);
  return PathStatus::kOk;
}

bool path_has_dot_segment_start(std::string_view path) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] == '/' && path[i + 1] == '.') return true;
  }
  return !path.empty() && path[0] == '.';
}

namespace {
constexpr std::string_view kWellKnown = "/.well-known";
}

bool path_is_well_known(std::string_view path) {
  return path.starts_with(kWellKnown) &&
         (path.size() == kWellKnown.size() || path[kWellKnown.size()] == '/');
}

bool path_should_deny_dotfile(std::string_view path) {
  if (path_is_well_known(path)) path.remove_prefix(kWellKnown.size());
  return path_has_dot_segment_start(path);
}

std::string_view extension_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  return name.substr(dot + 1);
}

bool path_is_normal(std::string_view raw_path) {
  if (raw_path.empty() || raw_path.front() != '/') return false;
  const char* p = raw_path.data();
  const char* end = p + raw_path.size();
  for (; p < end; ++p) {
    if (*p == '%') return false;
    if (*p == '/' && p + 1 < end && (p[1] == '/' || p[1] == '.')) return false;
  }
  return true;
}

}  // namespace peregrine::http
