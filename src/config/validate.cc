#define PCRE2_CODE_UNIT_WIDTH 8
#include "config/validate.h"

#include <grp.h>
#include <pcre2.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace peregrine::config::detail {

namespace fs = std::filesystem;

size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string lower = to_lower(word);
  std::string_view best;
  size_t best_distance = SIZE_MAX;
  for (std::string_view candidate : candidates) {
    size_t distance = edit_distance(lower, candidate);
    // "warning" -> "warn", "index_files" -> "index": a word that starts with a candidate is
    // as good as a one-letter typo of it. (Not the other way round: "server" is not a typo of
    // "server_header".)
    if (candidate.size() >= 3 && std::string_view(lower).starts_with(candidate)) {
      distance = std::min<size_t>(distance, 1);
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // A typo, not a different word: at most 2 edits, and no more than a third of the longer
  // name ("root" must not suggest "user").
  if (best.empty()) return std::string();
  size_t longer = std::max(lower.size(), best.size());
  if (best_distance > 2 || best_distance * 3 > longer) return std::string();
  return std::string(best);
}

bool user_exists(const std::string& name) {
  passwd entry{};
  passwd* result = nullptr;
  std::vector<char> buffer(16384);
  while (true) {
    int rc = getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &result);
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    return rc == 0 && result != nullptr;
  }
}

bool group_exists(const std::string& name) {
  group entry{};
  group* result = nullptr;
  std::vector<char> buffer(16384);
  while (true) {
    int rc = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &result);
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    return rc == 0 && result != nullptr;
  }
}

bool parse_log_level(std::string_view text, LogLevel* out) {
  if (text == "debug") {
    *out = LogLevel::kDebug;
  } else if (text == "info") {
    *out = LogLevel::kInfo;
  } else if (text == "warn") {
    *out = LogLevel::kWarn;
  } else if (text == "error") {
    *out = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

bool parse_event_backend(std::string_view text, EventBackend* out) {
  if (text == "epoll") {
    *out = EventBackend::kEpoll;
  } else if (text == "io_uring") {
    *out = EventBackend::kIoUring;
  } else if (text == "auto") {
    *out = EventBackend::kAuto;
  } else {
    return false;
  }
  return true;
}

std::string absolute_path(std::string_view path, const std::string& base_dir) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base_dir) / p;
  std::string result = p.lexically_normal().string();
  // "/var/www/" -> "/var/www": one spelling per directory.
  while (result.size() > 1 && result.back() == '/') result.pop_back();
  return result;
}

std::string directory_of(const std::string& file) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(file), ec);
  if (ec) p = fs::path(file);
  p = p.lexically_normal().parent_path();
  if (p.empty()) p = fs::current_path(ec);
  return p.string();
}

std::string readable_file_problem(const std::string& path) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      return "cannot be accessed: " + ec.message();
    return "does not exist";
  }
  if (fs::is_directory(status)) return "is a directory";
  if (!fs::is_regular_file(status)) return "is not a regular file";
  // access(2) answers for the real uid: the one that runs `peregrine -t` and the start, before
  // privileges are dropped.
  if (::access(path.c_str(), R_OK) != 0) return "cannot be read: " + std::string(strerror(errno));
  return "";
}

bool resolve_directory(std::string_view path, const std::string& base_dir, std::string* real,
                       std::string* error) {
  if (path.empty()) {
    *error = "is empty";
    return false;
  }
  std::string absolute = absolute_path(path, base_dir);
  std::error_code ec;
  fs::file_status status = fs::status(absolute, ec);
  if (ec || !fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      *error = "cannot be accessed: " + ec.message();
    } else {
      *error = "does not exist";
    }
    return false;
  }
  if (!fs::is_directory(status)) {
    *error = "is not a directory";
    return false;
  }
  fs::path canonical = fs::canonical(absolute, ec);
  if (ec) {
    *error = "cannot be resolved: " + ec.message();
    return false;
  }
  *real = canonical.string();
  return true;
}

bool apply_access_log(std::string_view value, const std::string& base_dir, AccessLog* log) {
  if (value.empty()) return false;
  if (value == "off") {
    log->format = AccessLogFormat::kOff;
    log->path.clear();
    return true;
  }
  if (log->format == AccessLogFormat::kOff) log->format = AccessLogFormat::kCombined;
  if (value == "stdout" || value == "stderr") {
    log->path = std::string(value);
  } else {
    log->path = absolute_path(value, base_dir);
  }
  return true;
}

bool is_token(std::string_view text) {
  if (text.empty()) return false;
  for (unsigned char c : text) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
    if (!ok || c == 0) return false;
  }
  return true;
}

bool has_control_chars(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

int regex_capture_count(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0,
                                   &error_code, &error_offset, nullptr);
  if (code == nullptr) return -1;
  uint32_t count = 0;
  int rc = pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &count);
  pcre2_code_free(code);
  return rc == 0 ? static_cast<int>(count) : -1;
}

bool valid_host_header(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == ':' || c == '[' || c == ']';
  });
}

}  // namespace peregrine::config::detail
