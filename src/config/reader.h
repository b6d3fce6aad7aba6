// The reading context every part of the configuration shares: the TOML document's file and
// directory, the typed value readers, and the errors they collect. Each reader reports at the
// file:line:col of the offending key or value with a hint, and keeps going, so that one run shows
// every problem. The handlers' and the upstream groups' readers use it as the loader does; the
// command line uses it on tables it builds itself (their positions are "<command line>").
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "config/config.h"

namespace peregrine::config {

// Durations longer than a day are typos (a missing unit), not intentions.
inline constexpr Millis kMaxDuration{24 * 60 * 60 * 1000};

class Reader {
 public:
  // `base_dir` resolves relative paths: the config file's directory, or the current directory.
  Reader(std::string file, std::string base_dir)
      : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  const std::string& file() const { return file_; }
  const std::string& base_dir() const { return base_dir_; }
  // The handlers routes may use (their keys, for hints too); the loader sets them.
  const HandlerSet& handlers() const { return handlers_ != nullptr ? *handlers_ : kNoHandlers; }
  void set_handlers(const HandlerSet* handlers) { handlers_ = handlers; }

  SourcePos pos_of(const toml::source_region& region) const {
    return SourcePos{file_, region.begin.line, region.begin.column};
  }

  void error(const toml::source_region& where, std::string message, std::string hint = {}) {
    errors_.push_back({pos_of(where), std::move(message), std::move(hint)});
  }
  void error(const SourcePos& where, std::string message, std::string hint = {}) {
    errors_.push_back({where, std::move(message), std::move(hint)});
  }
  // Worth saying, but not wrong: `peregrine -t` prints it and the load goes on.
  void warn(const SourcePos& where, std::string message, std::string hint = {}) {
    warnings_.push_back({where, std::move(message), std::move(hint), true});
  }
  std::vector<ConfigError> take_warnings() { return std::move(warnings_); }
  size_t error_count() const { return errors_.size(); }
  // The errors so far, sorted by position (stable: same-position errors keep their order).
  std::vector<ConfigError> take_errors();

  // Unknown keys, with a spelling suggestion or a note on where the key does belong.
  // `section` names the table in messages: "" (top level), "[limits]", "[[site.route]]"...
  void check_keys(const toml::table& table, const std::vector<std::string_view>& allowed,
                  std::string_view section);
  // "'NAME' must be EXPECTED, not GOT" with a hint for quoted numbers and booleans.
  void type_error(const toml::node& node, std::string_view name, std::string_view expected,
                  std::string hint = {});

  // Each returns false (after reporting) when the value is missing its type or range; *out is
  // then unchanged. `name` is the key's dotted path, for messages ("site.route.index").
  bool read_string(const toml::node& node, std::string_view name, std::string* out,
                   bool allow_empty = true);
  bool read_bool(const toml::node& node, std::string_view name, bool* out);
  bool read_int(const toml::node& node, std::string_view name, int64_t lo, int64_t hi,
                int64_t* out);
  // A string with a unit ("500ms", "20s") or an integer number of seconds.
  bool read_duration(const toml::node& node, std::string_view name, Millis lo, Millis hi,
                     Millis* out);
  // An integer number of bytes or a string with a unit ("16k", "1m").
  bool read_size(const toml::node& node, std::string_view name, uint64_t lo, uint64_t hi,
                 uint64_t* out);
  // A string or an array of strings; each element with its node, for positions.
  bool read_string_list(const toml::node& node, std::string_view name,
                        std::vector<std::pair<std::string, const toml::node*>>* out);

  // For a path that does not resolve: relative paths name the directory they were tried in.
  std::string relative_hint(std::string_view path) const;

 private:
  std::string file_;
  std::string base_dir_;
  inline static const HandlerSet kNoHandlers;
  const HandlerSet* handlers_ = nullptr;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
};

// The entries of a table as written (toml++ tables iterate by key), for lists whose order
// matters (parameters, headers) and for "listed twice" messages that name the later one.
std::vector<std::pair<const toml::key*, const toml::node*>> in_written_order(
    const toml::table& table);

// True when `a` comes before `b` in the file.
inline bool written_before(const toml::source_region& a, const toml::source_region& b) {
  return std::tie(a.begin.line, a.begin.column) < std::tie(b.begin.line, b.begin.column);
}

bool all_digits(std::string_view text);
bool contains(const std::vector<std::string_view>& list, std::string_view word);
std::string join(const std::vector<std::string_view>& words);  // "a, b, c"

}  // namespace peregrine::config
