#include "admin/config_api.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "admin/changes.h"
#include "admin/config.h"
#include "admin/control.h"
#include "core/log.h"
#include "metrics/render.h"

namespace peregrine::admin {

namespace {

std::atomic<ConfigControl*> g_control{nullptr};
// Serializes the operations below; also guards g_generations.
std::mutex g_mutex;
// The generation each version last ran as in this process, by ETag (without quotes).
std::map<std::string, uint64_t> g_generations;

constexpr std::string_view kNoFile =
    "no configuration file: this server runs in quick mode (start it with -c FILE to edit its "
    "configuration here)";

ApiAnswer error_answer(int status, std::string_view message, std::string_view more = {}) {
  ApiAnswer answer;
  answer.status = status;
  answer.body = "{\"error\":";
  metrics::append_json_string(answer.body, message);
  answer.body += more;
  answer.body += "}\n";
  return answer;
}

void append_problems(std::string& out, const std::vector<config::ConfigError>& list) {
  out += '[';
  bool first = true;
  for (const config::ConfigError& e : list) {
    if (!first) out += ',';
    first = false;
    out += "{\"file\":";
    metrics::append_json_string(out, e.pos.file);
    out += ",\"line\":" + std::to_string(e.pos.line);
    out += ",\"column\":" + std::to_string(e.pos.column);
    std::string message = e.message;
    if (!e.hint.empty()) message += " (hint: " + e.hint + ")";
    out += ",\"message\":";
    metrics::append_json_string(out, message);
    out += '}';
  }
  out += ']';
}

void append_strings(std::string& out, const std::vector<std::string>& list) {
  out += '[';
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ',';
    metrics::append_json_string(out, list[i]);
  }
  out += ']';
}

std::string bare(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

// If-Match: "*" or a list of ETags, one of which must be the running one.
bool if_match_matches(std::string_view header, const std::string& current) {
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == "*" || bare(item) == current) return true;
  }
  return false;
}

std::string history_dir(const std::string& source) {
  return source + ".history";
}

bool valid_etag_name(std::string_view etag) {
  return etag.size() == 32 && etag.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Keeps `text` in the history (again, if it is there: it becomes the newest), then removes the
// oldest versions beyond kHistoryVersions. A failure is logged, never fatal: the history is a
// convenience beside the file, which stays the truth.
void keep_version(const std::string& source, std::string_view text) {
  const std::string dir = history_dir(source);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    LOG_WARN("admin: cannot create %s: %s; the history is not kept", dir.c_str(),
             std::strerror(errno));
    return;
  }
  const std::string path = dir + "/" + bare(config_etag(text)) + ".toml";
  std::string error;
  if (::access(path.c_str(), F_OK) == 0) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  } else if (!write_file_atomically(path, text, &error)) {
    LOG_WARN("admin: cannot keep a version in %s: %s", dir.c_str(), error.c_str());
    return;
  }
  struct Version {
    std::string path;
    timespec time;
  };
  std::vector<Version> versions;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.ends_with(".toml") || !valid_etag_name(name.substr(0, name.size() - 5))) continue;
      struct stat st;
      std::string file = dir + "/" + std::string(name);
      if (stat(file.c_str(), &st) == 0) versions.push_back({file, st.st_mtim});
    }
    closedir(d);
  }
  if (versions.size() <= kHistoryVersions) return;
  std::sort(versions.begin(), versions.end(), [](const Version& x, const Version& y) {
    return x.time.tv_sec != y.time.tv_sec ? x.time.tv_sec > y.time.tv_sec
                                          : x.time.tv_nsec > y.time.tv_nsec;
  });
  for (size_t i = kHistoryVersions; i < versions.size(); ++i) unlink(versions[i].path.c_str());
}

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream content;
  content << in.rdbuf();
  *text = content.str();
  return true;
}

// {FIELDS"etag": ..., "text": ...} with the ETag header: a version's text.
ApiAnswer text_answer(std::string_view fields, const std::string& text) {
  ApiAnswer answer;
  answer.etag = config_etag(text);
  answer.body = "{";
  answer.body += fields;
  answer.body += "\"etag\":";
  metrics::append_json_string(answer.body, answer.etag);
  answer.body += ",\"text\":";
  metrics::append_json_string(answer.body, text);
  answer.body += "}\n";
  return answer;
}

// The process and the snapshot it serves; nullopt (with quick mode's 409) when there is no
// file to work on.
struct Running {
  ConfigControl* control = nullptr;
  std::shared_ptr<const config::Config> config;
  uint64_t generation = 0;
};

std::optional<Running> running_or(ApiAnswer* refusal) {
  Running running;
  running.control = g_control.load();
  if (!running.control || !running.control->reloadable()) {
    *refusal = error_answer(409, kNoFile);
    return std::nullopt;
  }
  running.config = running.control->running(&running.generation);
  return running;
}

ApiAnswer validation_errors(int status, const config::LoadResult& loaded) {
  ApiAnswer answer;
  answer.status = status;
  answer.body = "{\"valid\":";
  answer.body += loaded.errors.empty() ? "true" : "false";
  if (status != 200) {
    answer.body = "{\"error\":";
    metrics::append_json_string(answer.body,
                                std::to_string(loaded.errors.size()) +
                                    " error(s) in the new configuration; nothing was changed");
  }
  answer.body += ",\"errors\":";
  append_problems(answer.body, loaded.errors);
  answer.body += ",\"warnings\":";
  append_problems(answer.body, loaded.warnings);
  answer.body += "}\n";
  return answer;
}

// Replaces the file by `text` and reloads; restores the old text when the reload refuses it.
// Called with g_mutex held, `text` already validated.
ApiAnswer apply(ConfigControl& control, const config::Config& running, std::string_view text) {
  const std::string& path = running.source;
  keep_version(path, running.text);
  std::string error;
  if (!write_file_atomically(path, text, &error)) {
    LOG_ERROR("admin: cannot write the new configuration: %s", error.c_str());
    return error_answer(500, "cannot write the configuration file: " + error,
                        ",\"rolled_back\":false");
  }
  ReloadOutcome outcome = control.reload(true);
  if (!outcome.ok) {
    std::string restore_error;
    const bool restored = write_file_atomically(path, running.text, &restore_error);
    if (!restored)
      LOG_ERROR("admin: the new configuration failed and the old one could not be restored: %s",
                restore_error.c_str());
    else
      LOG_WARN("admin: applying the new configuration failed (%s); %s restored",
               outcome.failure.c_str(), path.c_str());
    std::string more = ",\"rolled_back\":";
    more += restored ? "true" : "false";
    more += ",\"errors\":";
    append_problems(more, outcome.errors);
    return error_answer(
        restored ? 409 : 500,
        restored ? outcome.failure
                 : outcome.failure + "; restoring the old file failed too: " + restore_error,
        more);
  }
  keep_version(path, text);
  const std::string etag = config_etag(text);
  g_generations[bare(etag)] = outcome.generation;
  ApiAnswer answer;
  answer.etag = etag;
  answer.body = "{\"generation\":" + std::to_string(outcome.generation) + ",\"etag\":";
  metrics::append_json_string(answer.body, etag);
  answer.body += ",\"changed\":";
  append_strings(answer.body, summarize_changes(running.text, text));
  answer.body += ",\"restart_required\":";
  append_strings(answer.body, outcome.restart_required);
  answer.body += "}\n";
  return answer;
}

// Validation, then apply: PUT and rollback.
ApiAnswer validate_and_apply(ConfigControl& control, const config::Config& running,
                             std::string_view text) {
  config::LoadResult loaded = config::load_string(text, running.source, running.handlers);
  if (!loaded.errors.empty()) return validation_errors(422, loaded);
  return apply(control, running, text);
}

}  // namespace

void set_control(ConfigControl* control) {
  std::lock_guard lock(g_mutex);  // not while an operation is under way
  g_control.store(control);
}

std::string config_etag(std::string_view text) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), out, &length, EVP_sha256(), nullptr);
  return "\"" + hex_digits(out, std::min(length, 16u)) + "\"";
}

bool write_file_atomically(const std::string& link, std::string_view text, std::string* error) {
  // A configuration file that is a symbolic link stays one: the file it names is replaced.
  std::string path = link;
  if (char* real = realpath(link.c_str(), nullptr)) {
    path = real;
    free(real);
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = dir + "/." + base + ".XXXXXX";
  int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot create a temporary file in " + dir + ": " + std::strerror(errno);
    return false;
  }
  auto fail = [&](const char* what) {
    *error = std::string(what) + " " + temp + ": " + std::strerror(errno);
    ::close(fd);
    unlink(temp.c_str());
    return false;
  };
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && fchmod(fd, st.st_mode & 07777) != 0) return fail("chmod");
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    fd = -1;
    *error = "close " + temp + ": " + std::strerror(errno);
    unlink(temp.c_str());
    return false;
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    *error = "rename to " + path + ": " + std::strerror(errno);
    unlink(temp.c_str());
    return false;
  }
  // The rename itself is durable once the directory is.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    ::close(dir_fd);
  }
  return true;
}

ApiAnswer get_config() {
  std::lock_guard lock(g_mutex);
  ApiAnswer refusal;
  std::optional<Running> running = running_or(&refusal);
  if (!running) return refusal;
  std::string fields = "\"source\":";
  metrics::append_json_string(fields, running->config->source);
  fields += ",\"generation\":" + std::to_string(running->generation) + ",";
  return text_answer(fields, running->config->text);
}

ApiAnswer validate_config(std::string_view text) {
  ApiAnswer refusal;
  std::optional<Running> running;
  {
    std::lock_guard lock(g_mutex);
    running = running_or(&refusal);
    if (!running) return refusal;
  }
  // Read under the running file's name, so that relative paths resolve and errors read as
  // `peregrine -t` prints them.
  return validation_errors(
      200, config::load_string(text, running->config->source, running->config->handlers));
}

ApiAnswer put_config(std::string_view text, std::optional<std::string_view> if_match) {
  std::lock_guard lock(g_mutex);
  ApiAnswer refusal;
  std::optional<Running> running = running_or(&refusal);
  if (!running) return refusal;
  const std::string current = config_etag(running->config->text);
  std::string more = ",\"etag\":";
  metrics::append_json_string(more, current);
  if (!if_match)
    return error_answer(428, "If-Match required: send the ETag of GET /api/config", more);
  if (!if_match_matches(*if_match, bare(current)))
    return error_answer(412,
                        "the configuration changed since it was read (If-Match is stale): read "
                        "it again",
                        more);
  return validate_and_apply(*running->control, *running->config, text);
}

ApiAnswer config_history() {
  std::lock_guard lock(g_mutex);
  ApiAnswer refusal;
  std::optional<Running> running = running_or(&refusal);
  if (!running) return refusal;
  const std::string current = bare(config_etag(running->config->text));
  g_generations.try_emplace(current, running->generation);
  struct Version {
    std::string etag;
    int64_t time;  // -1: not kept on disk (yet)
  };
  std::vector<Version> versions;
  const std::string dir = history_dir(running->config->source);
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.ends_with(".toml") || !valid_etag_name(name.substr(0, name.size() - 5))) continue;
      struct stat st;
      if (stat((dir + "/" + std::string(name)).c_str(), &st) == 0)
        versions.push_back({std::string(name.substr(0, 32)), st.st_mtim.tv_sec});
    }
    closedir(d);
  }
  std::sort(versions.begin(), versions.end(),
            [](const Version& x, const Version& y) { return x.time > y.time; });
  if (std::none_of(versions.begin(), versions.end(),
                   [&](const Version& v) { return v.etag == current; }))
    versions.insert(versions.begin(), {current, -1});
  ApiAnswer answer;
  answer.body = "{\"versions\":[";
  for (size_t i = 0; i < versions.size(); ++i) {
    const Version& v = versions[i];
    if (i) answer.body += ',';
    auto known = g_generations.find(v.etag);
    answer.body += "{\"generation\":";
    answer.body += known == g_generations.end() ? "null" : std::to_string(known->second);
    answer.body += ",\"etag\":";
    metrics::append_json_string(answer.body, "\"" + v.etag + "\"");
    answer.body += ",\"time\":";
    answer.body += v.time < 0 ? "null" : std::to_string(v.time);
    answer.body += ",\"current\":";
    answer.body += v.etag == current ? "true" : "false";
    answer.body += '}';
  }
  answer.body += "]}\n";
  return answer;
}

namespace {

// A kept version (or the running one) with what it takes to apply it.
struct Located {
  Running running;
  std::string text;
};

// Called with g_mutex held; nullopt with `refusal` saying why.
std::optional<Located> find_version(std::string_view etag, ApiAnswer* refusal) {
  std::optional<Running> running = running_or(refusal);
  if (!running) return std::nullopt;
  Located found{*running, {}};
  const std::string wanted = bare(etag);
  if (!valid_etag_name(wanted)) {
    *refusal = error_answer(400, "not a configuration ETag (32 hex digits, quoted or not)");
    return std::nullopt;
  }
  if (bare(config_etag(found.running.config->text)) == wanted) {
    found.text = found.running.config->text;
    return found;
  }
  if (!read_file(history_dir(found.running.config->source) + "/" + wanted + ".toml", &found.text) ||
      bare(config_etag(found.text)) != wanted) {
    *refusal = error_answer(404, "no such version in the history");
    return std::nullopt;
  }
  return found;
}

}  // namespace

ApiAnswer config_version(std::string_view etag) {
  std::lock_guard lock(g_mutex);
  ApiAnswer refusal;
  std::optional<Located> version = find_version(etag, &refusal);
  if (!version) return refusal;
  return text_answer("", version->text);
}

ApiAnswer rollback_config(std::string_view etag) {
  std::lock_guard lock(g_mutex);
  ApiAnswer refusal;
  std::optional<Located> version = find_version(etag, &refusal);
  if (!version) return refusal;
  return validate_and_apply(*version->running.control, *version->running.config, version->text);
}

ApiAnswer reload_config() {
  std::lock_guard lock(g_mutex);
  ApiAnswer refusal;
  if (!running_or(&refusal)) return refusal;
  ConfigControl& control = *g_control.load();
  ReloadOutcome outcome = control.reload(true);
  if (!outcome.ok) {
    std::string more = ",\"errors\":";
    append_problems(more, outcome.errors);
    return error_answer(409, outcome.failure, more);
  }
  uint64_t generation;
  g_generations[bare(config_etag(control.running(&generation)->text))] = outcome.generation;
  ApiAnswer answer;
  answer.body = "{\"generation\":" + std::to_string(outcome.generation) + ",\"restart_required\":";
  append_strings(answer.body, outcome.restart_required);
  answer.body += "}\n";
  return answer;
}

}  // namespace peregrine::admin
