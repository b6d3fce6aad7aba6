// A compiled PCRE2 regular expression (JIT where available). Immutable after construction, so
// one instance is shared by all workers; match data is per call.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

namespace peregrine {

class Regex {
 public:
  static constexpr int kMaxCaptures = 10;  // $0..$9
  struct Captures {
    std::array<std::string_view, kMaxCaptures> group{};
    int count = 0;
  };
  // Compiles `pattern`; on failure returns null and sets error_message and error_offset.
  static std::shared_ptr<const Regex> compile(std::string_view pattern, std::string* error_message,
                                              size_t* error_offset);
  ~Regex();
  Regex(const Regex&) = delete;  // owns the compiled pattern
  Regex& operator=(const Regex&) = delete;
  bool match(std::string_view subject, Captures* captures = nullptr) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code*
};

}  // namespace peregrine
