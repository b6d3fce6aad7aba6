// Checks shared by the configuration readers: the TOML loader (load.cc), the command line
// (cli.cc), the handlers' readers (src/handlers/NAME/config.cc) and the upstream groups'
// (src/upstream/config.cc). Not for runtime code.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace peregrine::config::detail {

// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions).
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate nearest to `word` when it is plausibly a typo of it, else "".
std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

bool user_exists(const std::string& name);
bool group_exists(const std::string& name);

bool parse_log_level(std::string_view text, LogLevel* out);
inline const std::vector<std::string_view> kLogLevels = {"debug", "info", "warn", "error"};

// `event_backend` and --event-backend: "epoll", "io_uring" or "auto".
bool parse_event_backend(std::string_view text, EventBackend* out);
inline const std::vector<std::string_view> kEventBackends = {"epoll", "io_uring", "auto"};

// `path` made absolute against `base_dir` (which is absolute) and lexically normalised.
std::string absolute_path(std::string_view path, const std::string& base_dir);
// The directory of `file`, absolute (against the current directory).
std::string directory_of(const std::string& file);
// "" when `path` (absolute) is a regular file this process can read, else what is wrong with it
// ("does not exist", "is a directory", "cannot be read: Permission denied", ...).
std::string readable_file_problem(const std::string& path);
// `path` (relative to `base_dir`) must exist and be a directory; *real gets its canonical form.
bool resolve_directory(std::string_view path, const std::string& base_dir, std::string* real,
                       std::string* error);

// "off" | "stdout" | "stderr" | a file path (made absolute against base_dir). Keeps the
// format unless the log is turned off; turning a log back on picks the combined format.
bool apply_access_log(std::string_view value, const std::string& base_dir, AccessLog* log);

// RFC 9110 token characters (methods, header names).
bool is_token(std::string_view text);
// A Host header value: a name or IP literal with an optional port; no spaces or controls.
bool valid_host_header(std::string_view host);
// Any byte < 0x20 or 0x7f: such strings cannot go into a header line or a log line verbatim.
bool has_control_chars(std::string_view text);
std::string to_lower(std::string_view text);

// The number of capture groups of a PCRE2 pattern (as Regex compiles it), or -1 when it does not
// compile. Regex does not expose it; split_path needs exactly two.
int regex_capture_count(std::string_view pattern);

}  // namespace peregrine::config::detail
