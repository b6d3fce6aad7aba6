#include "http/conditional.h"

#include <charconv>
#include <cstring>

#include "core/strings.h"
#include "http/http_date.h"

namespace peregrine::http {
namespace {

struct EntityTag {
  bool weak = false;
  std::string_view opaque;  // including the quotes
};

// Parses a whole entity-tag (no surrounding text). Returns false when malformed.
bool parse_etag(std::string_view s, EntityTag& tag) {
  tag.weak = false;
  if (s.starts_with("W/")) {
    tag.weak = true;
    s.remove_prefix(2);
  }
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') return false;
  if (s.substr(1, s.size() - 2).find('"') != std::string_view::npos) return false;
  tag.opaque = s;
  return true;
}

enum class Compare { kStrong, kWeak };

// Walks a #entity-tag list and reports whether any member matches `ours` under `cmp`. A
// malformed member stops the walk.
bool list_matches(std::string_view list, const EntityTag& ours, bool have_ours, Compare cmp) {
  size_t pos = 0;
  const size_t n = list.size();
  while (pos < n) {
    while (pos < n && (is_ows(list[pos]) || list[pos] == ',')) ++pos;
    if (pos >= n) break;
    EntityTag theirs;
    if (list.compare(pos, 2, "W/") == 0) {
      theirs.weak = true;
      pos += 2;
    }
    if (pos >= n || list[pos] != '"') return false;
    const size_t close = list.find('"', pos + 1);
    if (close == std::string_view::npos) return false;
    theirs.opaque = list.substr(pos, close + 1 - pos);
    pos = close + 1;
    while (pos < n && is_ows(list[pos])) ++pos;
    if (pos < n && list[pos] != ',') return false;  // junk after a tag

    if (have_ours && theirs.opaque == ours.opaque &&
        (cmp == Compare::kWeak || (!theirs.weak && !ours.weak))) {
      return true;
    }
  }
  return false;
}

// If-Match / If-None-Match evaluation: "*" matches any existing representation.
bool etag_condition_matches(std::string_view value, std::string_view our_etag, Compare cmp) {
  value = trim_ows(value);
  if (value == "*") return true;
  EntityTag ours;
  const bool have_ours = !our_etag.empty() && parse_etag(our_etag, ours);
  return list_matches(value, ours, have_ours, cmp);
}

}  // namespace

Precondition evaluate_preconditions(const ConditionalHeaders& h, const Validators& v,
                                    bool is_get_or_head) {
  // Step 1 / 2.
  if (h.if_match) {
    if (!etag_condition_matches(*h.if_match, v.etag, Compare::kStrong))
      return Precondition::kFailed;
  } else if (h.if_unmodified_since) {
    const std::optional<time_t> date = parse_http_date(*h.if_unmodified_since);
    if (date && v.last_modified > *date) return Precondition::kFailed;
  }
  // Step 3 / 4.
  if (h.if_none_match) {
    if (etag_condition_matches(*h.if_none_match, v.etag, Compare::kWeak)) {
      return is_get_or_head ? Precondition::kNotModified : Precondition::kFailed;
    }
  } else if (is_get_or_head && h.if_modified_since) {
    const std::optional<time_t> date = parse_http_date(*h.if_modified_since);
    if (date && v.last_modified <= *date) return Precondition::kNotModified;
  }
  return Precondition::kProceed;
}

bool if_range_matches(std::string_view if_range, const Validators& v) {
  if_range = trim_ows(if_range);
  if (if_range.starts_with('"') || if_range.starts_with("W/")) {
    EntityTag theirs;
    EntityTag ours;
    return parse_etag(if_range, theirs) && !theirs.weak && !v.etag.empty() &&
           parse_etag(v.etag, ours) && !ours.weak && theirs.opaque == ours.opaque;
  }
  const std::optional<time_t> date = parse_http_date(if_range);
  return date && *date == v.last_modified;
}

size_t format_etag(uint64_t mtime_ns_or_s, uint64_t size, char* out, size_t cap) {
  char buf[kEtagMaxLength];
  char* const end = buf + sizeof(buf);
  char* p = buf;
  *p++ = '"';
  p = std::to_chars(p, end, mtime_ns_or_s, 16).ptr;
  *p++ = '-';
  p = std::to_chars(p, end, size, 16).ptr;
  *p++ = '"';
  const auto len = static_cast<size_t>(p - buf);
  if (len > cap) return 0;
  std::memcpy(out, buf, len);
  return len;
}

}  // namespace peregrine::http
