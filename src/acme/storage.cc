#include "acme/storage.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "acme/crypto.h"
#include "acme/messages.h"
#include "client/url.h"

namespace peregrine::acme {
namespace {

using json = nlohmann::json;

std::string errno_text(const std::string& path, int err) {
  return path + ": " + std::strerror(err);
}

std::string parent_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

// A file or folder name from anything: bytes other than [A-Za-z0-9.-] become '_'.
std::string safe_name(std::string_view text) {
  std::string out;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-';
    out += ok ? c : '_';
  }
  // "." and ".." would name the folder itself or its parent.
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

struct LockContent {
  std::string holder;
  time_t expires = 0;
};

std::optional<LockContent> parse_lock(std::string_view text) {
  size_t nl = text.find('\n');
  if (nl == std::string_view::npos || nl == 0) return std::nullopt;
  LockContent lock{std::string(text.substr(0, nl)), 0};
  std::string_view rest = text.substr(nl + 1);
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  if (rest.empty() || rest.size() > 18 ||
      rest.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  lock.expires = static_cast<time_t>(std::stoll(std::string(rest)));
  return lock;
}

std::string lock_text(std::string_view holder, time_t expires) {
  return std::string(holder) + "\n" + std::to_string(expires) + "\n";
}

}  // namespace

bool make_dirs(const std::string& path, std::string* error) {
  if (path.empty()) return true;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    *error = path + ": exists and is not a folder";
    return false;
  }
  std::string parent = parent_of(path);
  if (parent != path && !make_dirs(parent, error)) return false;
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = errno_text(path, errno);
    return false;
  }
  return true;
}

bool write_file_atomic(const std::string& path, std::string_view data, mode_t mode,
                       std::string* error) {
  std::string dir = parent_of(path);
  if (!make_dirs(dir, error)) return false;
  std::string tmp = path + ".tmp." + random_suffix();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    *error = errno_text(tmp, errno);
    return false;
  }
  // The umask may have taken bits away; a key must end 0600 whatever it is.
  bool ok = ::fchmod(fd, mode) == 0 && write_all(fd, data) && ::fsync(fd) == 0;
  int err = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    *error = errno_text(tmp, err);
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    *error = errno_text(path, err);
    return false;
  }
  fsync_dir(dir);
  return true;
}

std::optional<std::string> read_file(const std::string& path, size_t limit, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = errno_text(path, errno);
    return std::nullopt;
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno_text(path, errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) {
      ::close(fd);
      *error = path + ": larger than " + std::to_string(limit) + " bytes";
      return std::nullopt;
    }
  }
  ::close(fd);
  return out;
}

std::string account_folder(std::string_view state, std::string_view directory_url) {
  std::string error;
  auto url = client::parse_url(directory_url, &error);
  std::string ca =
      url ? url->host + (url->port == (url->tls ? 443 : 80) ? "" : ":" + std::to_string(url->port))
          : std::string(directory_url);
  return std::string(state) + "/accounts/" + safe_name(ca);
}

std::string certificate_folder(std::string_view state, std::string_view first_name) {
  std::string name(first_name);
  if (name.rfind("*.", 0) == 0) name = "_wildcard_" + name.substr(1);
  return std::string(state) + "/certificates/" + safe_name(name);
}

std::string format_meta(const CertificateMeta& meta) {
  json doc = {{"names", meta.names},
              {"issuer", meta.issuer},
              {"not_before", meta.not_before},
              {"not_after", meta.not_after},
              {"ari_id", meta.ari_id},
              {"order_url", meta.order_url},
              {"directory_url", meta.directory_url}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<CertificateMeta> parse_meta(std::string_view text, std::string* error) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    *error = "not a JSON object";
    return std::nullopt;
  }
  CertificateMeta meta;
  auto names = doc.find("names");
  if (names == doc.end() || !names->is_array() || names->empty()) {
    *error = "\"names\" is missing or not a list of names";
    return std::nullopt;
  }
  for (const json& n : *names) {
    if (!n.is_string()) {
      *error = "\"names\" holds something other than a string";
      return std::nullopt;
    }
    meta.names.push_back(n.get<std::string>());
  }
  auto text_of = [&](const char* key) {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto time_of = [&](const char* key, time_t* out) {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_integer()) return false;
    *out = it->get<time_t>();
    return true;
  };
  if (!time_of("not_before", &meta.not_before) || !time_of("not_after", &meta.not_after)) {
    *error = "\"not_before\" or \"not_after\" is missing or not a number";
    return std::nullopt;
  }
  meta.issuer = text_of("issuer");
  meta.ari_id = text_of("ari_id");
  meta.order_url = text_of("order_url");
  meta.directory_url = text_of("directory_url");
  return meta;
}

std::optional<StoredCertificate> load_certificate(const std::string& folder, std::string* error) {
  constexpr size_t kLimit = 1 << 20;
  StoredCertificate out;
  std::string why;
  std::string chain_path = folder + "/chain.pem";
  std::string key_path = folder + "/key.pem";
  std::string meta_path = folder + "/meta.json";
  auto chain_pem = read_file(chain_path, kLimit, error);
  if (!chain_pem) return std::nullopt;
  auto chain = parse_pem_chain(*chain_pem, &why);
  if (!chain) {
    *error = chain_path + ": " + why;
    return std::nullopt;
  }
  auto key_pem = read_file(key_path, kLimit, error);
  if (!key_pem) return std::nullopt;
  PkeyPtr key = parse_private_key_pem(*key_pem, &why);
  if (!key) {
    *error = key_path + ": " + why;
    return std::nullopt;
  }
  if (X509_check_private_key((*chain)[0].get(), key.get()) != 1) {
    ERR_clear_error();
    *error = key_path + ": the key does not match the certificate in " + chain_path;
    return std::nullopt;
  }
  auto meta_text = read_file(meta_path, kLimit, error);
  if (!meta_text) return std::nullopt;
  auto meta = parse_meta(*meta_text, &why);
  if (!meta) {
    *error = meta_path + ": " + why;
    return std::nullopt;
  }
  out.meta = std::move(*meta);
  out.chain_pem = std::move(*chain_pem);
  out.key_pem = std::move(*key_pem);
  out.not_before = certificate_not_before((*chain)[0].get()).value_or(0);
  out.not_after = certificate_not_after((*chain)[0].get()).value_or(0);
  return out;
}

std::string lock_holder_name() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

OrderLock::Outcome OrderLock::acquire(const std::string& path, std::string_view holder, time_t now,
                                      time_t ttl) {
  Outcome out;
  if (!make_dirs(parent_of(path), &out.error)) return out;
  // A few rounds: each ends with the lock ours, held by a live holder, or the path free again.
  for (int round = 0; round < 4; ++round) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      bool ok = write_all(fd, lock_text(holder, now + ttl)) && ::fsync(fd) == 0;
      ::close(fd);
      if (!ok) {
        out.error = errno_text(path, errno);
        ::unlink(path.c_str());
        out.result = Result::kError;
        return out;
      }
      fsync_dir(parent_of(path));
      out.result = Result::kAcquired;
      return out;
    }
    if (errno != EEXIST) {
      out.error = errno_text(path, errno);
      return out;
    }
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // released meanwhile
      out.error = errno_text(path, errno);
      return out;
    }
    struct stat seen;
    char buf[512];
    ssize_t n = ::read(fd, buf, sizeof buf);
    bool stat_ok = ::fstat(fd, &seen) == 0;
    ::close(fd);
    if (n < 0 || !stat_ok) {
      out.error = errno_text(path, errno);
      return out;
    }
    auto lock = parse_lock(std::string_view(buf, static_cast<size_t>(n)));
    if (lock && lock->expires > now) {
      out.result = Result::kHeld;
      out.holder = lock->holder;
      out.expires = lock->expires;
      return out;
    }
    // An unreadable lock may be one being written this instant (created, not yet filled): give
    // its writer a moment before judging it damaged.
    if (!lock && now - seen.st_mtime < 10) {
      out.result = Result::kHeld;
      out.holder = "(a lock being written)";
      out.expires = seen.st_mtime + 10;
      return out;
    }
    std::string aside = path + ".stale." + random_suffix();
    if (::rename(path.c_str(), aside.c_str()) != 0) {
      if (errno == ENOENT) continue;
      out.error = errno_text(path, errno);
      return out;
    }
    struct stat moved;
    if (::stat(aside.c_str(), &moved) == 0 &&
        (moved.st_ino != seen.st_ino || moved.st_dev != seen.st_dev)) {
      // Another instance took the stale lock over first and we moved its fresh one: put it back
      // (link fails if a third made one meanwhile, which then holds it), and try again.
      ::link(aside.c_str(), path.c_str());
      ::unlink(aside.c_str());
      continue;
    }
    ::unlink(aside.c_str());
    out.error = lock ? "took over the lock of " + lock->holder + ", expired " +
                           std::to_string(now - lock->expires) + " s ago"
                     : "took over a damaged lock (" + path + ")";
  }
  std::string note = out.error;
  out = Outcome{};
  out.result = Result::kHeld;
  out.holder = "(contended)";
  out.expires = now + 1;
  out.error = note;
  return out;
}

bool OrderLock::refresh(const std::string& path, std::string_view holder, time_t now, time_t ttl) {
  std::string error;
  auto text = read_file(path, 512, &error);
  if (!text) return false;
  auto lock = parse_lock(*text);
  if (!lock || lock->holder != holder) return false;
  return write_file_atomic(path, lock_text(holder, now + ttl), 0644, &error);
}

bool OrderLock::release(const std::string& path, std::string_view holder) {
  std::string error;
  auto text = read_file(path, 512, &error);
  if (!text) return false;
  auto lock = parse_lock(*text);
  if (!lock || lock->holder != holder) return false;
  return ::unlink(path.c_str()) == 0;
}

}  // namespace peregrine::acme
