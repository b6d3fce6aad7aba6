// Conditional requests (RFC 9110 13). Pure: evaluates the precondition header fields of a request
// against a representation's validators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string_view>

namespace peregrine::http {

enum class Precondition {
  kProceed,
  kNotModified,  // 304
  kFailed,       // 412
};

struct Validators {
  // The representation's entity-tag with its quotes: "\"5f-1a2b\"" (strong) or "W/\"5f-1a2b\""
  // (weak). Empty when the representation has no entity-tag (then only "*" matches it).
  std::string_view etag;
  time_t last_modified;  // seconds since the epoch, as sent in Last-Modified
};

struct ConditionalHeaders {
  std::optional<std::string_view> if_match = std::nullopt;
  std::optional<std::string_view> if_none_match = std::nullopt;
  std::optional<std::string_view> if_modified_since = std::nullopt;
  std::optional<std::string_view> if_unmodified_since = std::nullopt;
};

// RFC 9110 13.2.2, steps 1-4, for a representation that exists:
//  1. If-Match present: "*" or a strong match of a listed tag -> go on to 3; else 412.
//  2. Else If-Unmodified-Since with a valid HTTP-date: last_modified <= date -> go on; else 412.
//     An invalid date (or a list of dates) is ignored.
//  3. If-None-Match present: "*" or a weak match of a listed tag -> 304 for GET/HEAD, 412
//     otherwise; no match -> kProceed (If-Modified-Since is then not consulted).
//  4. Else, for GET/HEAD only, If-Modified-Since with a valid date: last_modified <= date -> 304.
//     An invalid date is ignored.
// Entity-tag lists are comma-separated with optional whitespace; a malformed member ends the list
// (members before it still count). Step 5 (Range/If-Range) is the caller's, via if_range_matches.
Precondition evaluate_preconditions(const ConditionalHeaders& h, const Validators& v,
                                    bool is_get_or_head);

// If-Range (RFC 9110 13.1.5): true when the value is an entity-tag that strongly matches v.etag
// (a weak tag on either side never matches), or an HTTP-date exactly equal to v.last_modified.
// Anything else (an unparsable value, a list) is false: send the whole representation.
bool if_range_matches(std::string_view if_range, const Validators& v);

// Longest entity-tag format_etag writes: 2 quotes + 16 hex digits + '-' + 16 hex digits.
inline constexpr size_t kEtagMaxLength = 35;

// Writes a strong entity-tag "\"<hex mtime>-<hex size>\"" (lower-case hex, no leading zeros,
// quotes included, no NUL), e.g. mtime 0x5f3e1c2a, size 1234 -> "\"5f3e1c2a-4d2\"". Returns its
// length, or 0 when `cap` is too small (kEtagMaxLength always suffices).
//
// With mtime in whole seconds this is exactly nginx's ETag, so caches stay warm when a site moves
// between the two servers. Passing nanoseconds instead catches a same-size rewrite within one
// second (which a strong tag is supposed to notice) at the cost of that compatibility. Either
// way the tag changes whenever the file's mtime or size does; it is not a content hash.
size_t format_etag(uint64_t mtime_ns_or_s, uint64_t size, char* out, size_t cap);

}  // namespace peregrine::http
