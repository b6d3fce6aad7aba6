#include "config/php_fpm_pools.h"

#include <dirent.h>
#include <glob.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "config/listen_address.h"

namespace peregrine::config {

namespace {

constexpr int kMaxIncludeDepth = 4;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string unquote(std::string_view value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front())
    return std::string(value.substr(1, value.size() - 2));
  // An unquoted value ends at a comment.
  size_t comment = value.find(';');
  return std::string(trim(value.substr(0, comment)));
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
}

std::string directory_of(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

void parse_into(std::string_view text, const std::string& file, const IncludeReader& read_include,
                int depth, std::vector<FpmPool>* pools) {
  FpmPool* pool = nullptr;  // null in [global] or before any section
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = trim(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty() || line.front() == ';' || line.front() == '#') continue;
    if (line.front() == '[') {
      size_t close = line.find(']');
      std::string name(trim(line.substr(1, close == std::string_view::npos ? 0 : close - 1)));
      if (name == "global" || name.empty()) {
        pool = nullptr;
      } else {
        pools->push_back({name, "", 0, file});
        pool = &pools->back();
      }
      continue;
    }
    size_t equals = line.find('=');
    if (equals == std::string_view::npos) continue;
    std::string_view key = trim(line.substr(0, equals));
    std::string value = unquote(trim(line.substr(equals + 1)));
    if (key == "include") {
      if (depth >= kMaxIncludeDepth || !read_include) continue;
      if (!value.starts_with('/')) value = directory_of(file) + "/" + value;
      size_t before = pools->size();
      for (auto& [path, included] : read_include(value))
        parse_into(included, path, read_include, depth + 1, pools);
      // The vector may have grown: an include ends the section it appears in, as in php-fpm.
      if (pools->size() != before) pool = nullptr;
      continue;
    }
    if (pool == nullptr) continue;
    if (key == "listen") {
      replace_all(value, "$pool", pool->name);
      pool->listen = value;
    } else if (key == "pm.max_children") {
      uint32_t n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec == std::errc() && ptr == value.data() + value.size()) pool->max_children = n;
    }
  }
}

std::vector<std::pair<std::string, std::string>> read_glob(const std::string& pattern) {
  std::vector<std::pair<std::string, std::string>> files;
  glob_t found{};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      std::ifstream in(found.gl_pathv[i]);
      if (!in) continue;
      std::ostringstream text;
      text << in.rdbuf();
      files.emplace_back(found.gl_pathv[i], text.str());
    }
  }
  globfree(&found);
  return files;
}

// The configuration file each running php-fpm master names in its title.
std::vector<std::string> master_config_files() {
  std::vector<std::string> files;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return files;
  constexpr std::string_view kTitle = "php-fpm: master process (";
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + entry->d_name + "/cmdline");
    std::string title;
    if (!std::getline(in, title, '\0') || !title.starts_with(kTitle)) continue;
    size_t close = title.rfind(')');
    if (close == std::string::npos || close <= kTitle.size()) continue;
    files.push_back(title.substr(kTitle.size(), close - kTitle.size()));
  }
  closedir(proc);
  return files;
}

}  // namespace

std::vector<FpmPool> parse_fpm_pools(std::string_view text, const std::string& file,
                                     const IncludeReader& read_include) {
  std::vector<FpmPool> pools;
  parse_into(text, file, read_include, 0, &pools);
  return pools;
}

bool fpm_listen_matches(std::string_view listen, const UpstreamServer& server) {
  if (listen.empty()) return false;
  ListenAddress address;
  std::string error, hint;
  std::string text = listen.front() == '/' ? "unix:" + std::string(listen) : std::string(listen);
  if (!parse_listen_address(text, &address, &error, &hint)) return false;
  const sockaddr_storage& ours = server.addr;
  if (address.addr.ss_family == AF_UNIX) {
    if (ours.ss_family != AF_UNIX) return false;
    if (same_endpoint(address.addr, ours)) return true;
    // /var/run/php/fpm.sock and /run/php/fpm.sock are one socket when /var/run is a link.
    struct stat a, b;
    const char* path = reinterpret_cast<const sockaddr_un&>(ours).sun_path;
    return stat(std::string(listen).c_str(), &a) == 0 && stat(path, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }
  if (same_endpoint(address.addr, ours)) return true;
  if (endpoint_port(address.addr) != endpoint_port(ours)) return false;
  // php-fpm on every address ("9000", "0.0.0.0:9000", "[::]:9000") takes ours too.
  if (address.addr.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(address.addr).sin_addr.s_addr == INADDR_ANY;
  if (address.addr.ss_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6&>(address.addr).sin6_addr);
  return false;
}

std::optional<FpmLimit> find_fpm_limit(const UpstreamServer& server) {
  for (const std::string& file : master_config_files()) {
    auto files = read_glob(file);
    if (files.empty()) continue;
    for (const FpmPool& pool : parse_fpm_pools(files.front().second, file, read_glob)) {
      if (pool.max_children > 0 && fpm_listen_matches(pool.listen, server))
        return FpmLimit{pool.max_children, pool.name, pool.file};
    }
  }
  return std::nullopt;
}

}  // namespace peregrine::config
