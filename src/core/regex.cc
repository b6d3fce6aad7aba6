// PCRE2 (8-bit, byte semantics) behind peregrine::Regex. Patterns are compiled once at config
// load and JIT-compiled when the platform supports it; match() is const and thread-safe: the
// only mutable state, the match data block, is per thread.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/regex.h"

#include <pcre2.h>

namespace peregrine {

namespace {

// A regex route runs on attacker-chosen paths; bound the work one match may do so a
// pathological pattern costs a failed match, not a stuck worker. (PCRE2's default is 10M.)
constexpr uint32_t kMatchLimit = 1'000'000;
constexpr uint32_t kDepthLimit = 100'000;

const pcre2_match_context* match_context() {
  static pcre2_match_context* const context = [] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    if (c != nullptr) {
      pcre2_set_match_limit(c, kMatchLimit);
      pcre2_set_depth_limit(c, kDepthLimit);
    }
    return c;
  }();
  return context;
}

// One match data block per thread, sized for $0..$9. Patterns with more groups still match;
// only the first kMaxCaptures groups are reported.
pcre2_match_data* thread_match_data() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(Regex::kMaxCaptures, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

}  // namespace

std::shared_ptr<const Regex> Regex::compile(std::string_view pattern, std::string* error_message,
                                            size_t* error_offset) {
  int error_code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0,
                                   &error_code, &offset, nullptr);
  if (code == nullptr) {
    if (error_message != nullptr) {
      PCRE2_UCHAR buffer[256];
      int n = pcre2_get_error_message(error_code, buffer, sizeof buffer);
      *error_message = n > 0 ? std::string(reinterpret_cast<const char*>(buffer), n)
                             : "unknown PCRE2 error " + std::to_string(error_code);
    }
    if (error_offset != nullptr) *error_offset = offset;
    return nullptr;
  }
  // JIT is an optimisation only: when unavailable (or out of executable memory) pcre2_match
  // falls back to the interpreter with identical results.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);

  std::shared_ptr<Regex> regex(new Regex());
  regex->pattern_.assign(pattern);
  regex->code_ = code;
  if (error_message != nullptr) error_message->clear();
  if (error_offset != nullptr) *error_offset = 0;
  return regex;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool Regex::match(std::string_view subject, Captures* captures) const {
  if (captures != nullptr) *captures = Captures{};
  pcre2_match_data* data = thread_match_data();
  if (code_ == nullptr || data == nullptr) return false;
  // string_view::data() may be null for an empty view; PCRE2 wants a valid pointer.
  static constexpr char kEmpty[] = "";
  const char* begin = subject.data() != nullptr ? subject.data() : kEmpty;
  int rc =
      pcre2_match(static_cast<const pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(begin),
                  subject.size(), 0, 0, data, const_cast<pcre2_match_context*>(match_context()));
  if (rc < 0) return false;  // PCRE2_ERROR_NOMATCH, or a limit was hit: treated as no match
  if (captures != nullptr) {
    // rc == 0: more groups matched than the ovector holds; every slot is filled.
    int count = rc == 0 ? kMaxCaptures : rc;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    for (int i = 0; i < count; ++i) {
      PCRE2_SIZE start = ovector[2 * i];
      PCRE2_SIZE end = ovector[2 * i + 1];
      if (start == PCRE2_UNSET || end < start) continue;  // unset group (or \K oddity): empty
      captures->group[i] = subject.substr(start, end - start);
    }
    captures->count = count;
  }
  return true;
}

}  // namespace peregrine
