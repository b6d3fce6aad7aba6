#include "http/range.h"

#include <cstring>

namespace peregrine::http {
namespace {

constexpr bool is_ows(char c) {
  return c == ' ' || c == '\t';
}
constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr uint64_t kU64Max = ~uint64_t{0};

// Reads 1*DIGIT at s[pos..], saturating at UINT64_MAX. Returns false when there is no digit.
bool read_number(std::string_view s, size_t& pos, uint64_t& value) {
  const size_t start = pos;
  uint64_t v = 0;
  while (pos < s.size() && is_digit(s[pos])) {
    const auto d = static_cast<uint64_t>(s[pos] - '0');
    v = v > (kU64Max - d) / 10 ? kU64Max : v * 10 + d;
    ++pos;
  }
  value = v;
  return pos != start;
}

// Adds [first, last] to the sorted, disjoint, non-adjacent set `set` (size `count`), merging
// every piece it overlaps or touches. Returns false when the result would exceed kMaxRanges.
bool insert_merged(ByteRange* set, size_t& count, ByteRange r) {
  // Find the first piece that is not entirely before r (and not adjacent to it).
  size_t i = 0;
  while (i < count && set[i].last != kU64Max && set[i].last + 1 < r.first) ++i;
  // Merge every piece starting at or before r.last + 1.
  size_t j = i;
  while (j < count && (r.last == kU64Max || set[j].first <= r.last + 1)) {
    if (set[j].first < r.first) r.first = set[j].first;
    if (set[j].last > r.last) r.last = set[j].last;
    ++j;
  }
  const size_t merged = j - i;  // pieces replaced by r
  if (merged == 0) {
    if (count == kMaxRanges) return false;
    std::memmove(set + i + 1, set + i, (count - i) * sizeof(ByteRange));
    ++count;
  } else if (merged > 1) {
    std::memmove(set + i + 1, set + j, (count - j) * sizeof(ByteRange));
    count -= merged - 1;
  }
  set[i] = r;
  return true;
}

bool unit_is_bytes(std::string_view unit) {
  constexpr std::string_view kBytes = "bytes";
  if (unit.size() != kBytes.size()) return false;
  for (size_t i = 0; i < unit.size(); ++i) {
    if ((unit[i] | 0x20) != kBytes[i]) return false;
  }
  return true;
}

// Appends the decimal digits of v at p; returns the new end. At most 20 bytes.
char* put_u64(char* p, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

size_t copy_out(const char* buf, const char* end, char* out, size_t cap) {
  const auto len = static_cast<size_t>(end - buf);
  if (len > cap) return 0;
  std::memcpy(out, buf, len);
  return len;
}

}  // namespace

RangeSet parse_range(std::string_view v, uint64_t file_size) {
  RangeSet result;
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  const size_t eq = v.find('=');
  if (eq == std::string_view::npos || !unit_is_bytes(v.substr(0, eq))) return result;

  ByteRange set[kMaxRanges];
  size_t count = 0;
  bool any_spec = false;
  bool too_many = false;
  size_t pos = eq + 1;
  const size_t n = v.size();
  while (true) {
    while (pos < n && is_ows(v[pos])) ++pos;
    if (pos < n && v[pos] != ',') {
      // One range-spec.
      uint64_t first = 0;
      uint64_t last = kU64Max;
      bool suffix = false;
      if (v[pos] == '-') {
        suffix = true;
        ++pos;
        if (!read_number(v, pos, last)) return result;
      } else {
        if (!read_number(v, pos, first)) return result;
        if (pos >= n || v[pos] != '-') return result;
        ++pos;
        if (pos < n && is_digit(v[pos])) {
          read_number(v, pos, last);
          if (last < first) return result;  // invalid range-spec: ignore the header
        }
      }
      any_spec = true;
      if (!too_many && file_size > 0) {
        bool keep = true;
        ByteRange r{};
        if (suffix) {
          if (last == 0) {
            keep = false;
          } else {
            r.first = last >= file_size ? 0 : file_size - last;
            r.last = file_size - 1;
          }
        } else if (first >= file_size) {
          keep = false;
        } else {
          r.first = first;
          r.last = last >= file_size ? file_size - 1 : last;
        }
        // Keep scanning after overflow: a syntax error later still means "ignore".
        if (keep && !insert_merged(set, count, r)) too_many = true;
      }
      while (pos < n && is_ows(v[pos])) ++pos;
    }
    if (pos >= n) break;
    if (v[pos] != ',') return result;  // junk after a range-spec
    ++pos;
  }
  if (!any_spec || too_many) return result;
  if (count == 0) {
    result.status = RangeStatus::kUnsatisfiable;
    return result;
  }
  result.status = RangeStatus::kSatisfiable;
  result.count = count;
  std::memcpy(result.ranges, set, count * sizeof(ByteRange));
  return result;
}

size_t format_content_range(const ByteRange& r, uint64_t size, char* out, size_t cap) {
  char buf[kContentRangeMaxLength];
  std::memcpy(buf, "bytes ", 6);
  char* p = put_u64(buf + 6, r.first);
  *p++ = '-';
  p = put_u64(p, r.last);
  *p++ = '/';
  p = put_u64(p, size);
  return copy_out(buf, p, out, cap);
}

size_t format_unsatisfied_range(uint64_t size, char* out, size_t cap) {
  char buf[kContentRangeMaxLength];
  std::memcpy(buf, "bytes */", 8);
  char* p = put_u64(buf + 8, size);
  return copy_out(buf, p, out, cap);
}

}  // namespace peregrine::http
