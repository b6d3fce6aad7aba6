// The configuration endpoints of the admin API (see docs/admin.md): the running text with its
// ETag, validation, a guarded replacement (If-Match, atomic write, kept history, graceful
// reload, restore on failure), the history with rollback, and a plain reload.
//
// One mutex serializes every operation that reads or replaces the file, whichever worker
// thread it arrives on; the apply itself goes through ConfigControl (admin/control.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace peregrine::admin {

// An endpoint's answer: status, JSON body, and the ETag header when there is one.
struct ApiAnswer {
  int status = 200;
  std::string body;
  std::string etag;
};

// "\"<32 hex digits>\"": the first 128 bits of the text's SHA-256, quoted as an ETag is.
std::string config_etag(std::string_view text);

// Versions kept in the history directory (<config file>.history/) beside the file.
inline constexpr size_t kHistoryVersions = 20;

ApiAnswer get_config();
ApiAnswer validate_config(std::string_view text);
// `if_match`: the If-Match header (nullopt when absent: 428).
ApiAnswer put_config(std::string_view text, std::optional<std::string_view> if_match);
ApiAnswer config_history();
ApiAnswer config_version(std::string_view etag);
ApiAnswer rollback_config(std::string_view etag);
ApiAnswer reload_config();

// Writes `text` to `path` so that a reader sees the old file or the new one, whole: a temporary
// file in the same directory, fsync, rename over `path`, fsync of the directory. The old file's
// mode is kept; a symbolic link is followed, not replaced. False with `error` when any step
// fails (the old file is then untouched).
bool write_file_atomically(const std::string& path, std::string_view text, std::string* error);

}  // namespace peregrine::admin
