// Range requests (RFC 9110 14). Pure: parses a Range header against a representation size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace peregrine::http {

inline constexpr size_t kMaxRanges = 16;

struct ByteRange {
  uint64_t first;
  uint64_t last;  // inclusive
};

enum class RangeStatus {
  kNone,           // no Range header, or one to ignore (other unit, bad syntax, too many pieces)
  kSatisfiable,    // 206: ranges[0..count) are set
  kUnsatisfiable,  // 416 (send Content-Range: bytes */size)
};

struct RangeSet {
  RangeStatus status = RangeStatus::kNone;
  ByteRange ranges[kMaxRanges] = {};
  size_t count = 0;
};

// Parses `header_value` (e.g. "bytes=0-99, -500, 9500-") for a representation of `file_size`
// bytes:
//  - the unit must be "bytes" (any case), else kNone; leading/trailing spaces and tabs and
//    spaces/tabs around commas are allowed, empty list elements ("0-1,,5-6") are skipped;
//  - any syntax error, including last < first, makes the whole header kNone (RFC 9110 allows
//    ignoring it; a 200 with the whole file is always a correct answer). Numbers too large for
//    64 bits saturate: they are syntactically fine and mean "beyond the end";
//  - a range starting at or beyond file_size is dropped, "-0" is dropped, and every range of a
//    zero-length file is dropped; if nothing remains -> kUnsatisfiable;
//  - `last` is clamped to file_size - 1; a suffix "-n" becomes the last min(n, size) bytes;
//  - the remaining ranges are sorted by first byte, and overlapping or adjacent ones are merged
//    (so "0-0,0-0,0-0,..." cannot amplify the response); if more than kMaxRanges disjoint pieces
//    remain -> kNone (serve the whole file).
// Allocation-free; linear in the header length times kMaxRanges.
RangeSet parse_range(std::string_view header_value, uint64_t file_size);

// Longest Content-Range value: "bytes " + 20 digits + "-" + 20 + "/" + 20.
inline constexpr size_t kContentRangeMaxLength = 68;

// Writes "bytes <first>-<last>/<size>" (no NUL). Returns its length, or 0 (writing nothing
// useful) when `cap` is too small; a cap of kContentRangeMaxLength always suffices.
size_t format_content_range(const ByteRange& r, uint64_t size, char* out, size_t cap);

// Writes "bytes */<size>" for a 416 response. Same return convention.
size_t format_unsatisfied_range(uint64_t size, char* out, size_t cap);

}  // namespace peregrine::http
