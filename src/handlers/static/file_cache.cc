#include "handlers/static/file_cache.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "compress/decision.h"
#include "handlers/static/mime.h"
#include "http/conditional.h"
#include "http/http_date.h"
#include "http/path.h"

namespace peregrine::static_files {
namespace {

// Without openat2 (kernels before 5.6, valgrind): open normally, then check where the
// descriptor really points. Slower, but only cache misses pay.
int open_and_verify_beneath(int dir_fd, const std::string& root, const char* path, int flags) {
  int fd = openat(dir_fd, path, flags | O_CLOEXEC);
  if (fd < 0) return fd;
  char link[64], target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target);
  std::string_view resolved(target, n > 0 ? static_cast<size_t>(n) : 0);
  bool inside = n > 0 && resolved.starts_with(root) &&
                (resolved.size() == root.size() || resolved[root.size()] == '/' || root == "/");
  if (!inside) {
    ::close(fd);
    errno = EXDEV;
    return -1;
  }
  return fd;
}

int openat2_beneath(int dir_fd, const std::string& root, const char* path, int flags) {
  static bool available = true;  // per process; a benign race at worst re-tries openat2 once
  if (available) {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd;
    do {
      fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof how);
    } while (fd < 0 && errno == EAGAIN);  // a concurrent rename can ask us to retry
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    available = false;
  }
  return open_and_verify_beneath(dir_fd, root, path, flags);
}

int64_t mtime_ns_of(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

bool read_whole(int fd, std::string& out, size_t size) {
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, out.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

FileCache::FileCache(const Root& root, const MimeTable& mime, CacheOptions options)
    : root_(root), mime_(mime), options_(options) {}

int FileCache::open_beneath(std::string_view rel_path, int flags) const {
  // rel_path starts with '/': skip it so the lookup is relative to the root directory.
  std::string rel(rel_path.substr(1));
  if (rel.empty()) rel = ".";
  if (root_.symlinks_outside) return openat(root_.dir_fd, rel.c_str(), flags | O_CLOEXEC);
  return openat2_beneath(root_.dir_fd, root_.path, rel.c_str(), flags);
}

bool FileCache::still_valid(const CachedFile& entry, std::string_view rel_path) const {
  int fd = open_beneath(rel_path, O_PATH);
  if (fd < 0)
    return entry.kind == CachedFile::Kind::kMissing && (errno == ENOENT || errno == ENOTDIR);
  struct stat st;
  bool same = fstat(fd, &st) == 0 && entry.kind != CachedFile::Kind::kMissing &&
              entry.kind != CachedFile::Kind::kForbidden && st.st_dev == entry.dev &&
              st.st_ino == entry.ino && mtime_ns_of(st) == entry.mtime_ns &&
              static_cast<uint64_t>(st.st_size) == entry.size;
  ::close(fd);
  return same;
}

Ref<CachedFile> FileCache::lookup(std::string_view rel_path, int64_t now_ms) {
  auto it = entries_.find(rel_path);
  if (it != entries_.end()) {
    CachedFile& entry = *it->second;
    if (now_ms - entry.checked_at_ms < options_.valid_ms) return it->second;
    if (still_valid(entry, rel_path)) {
      entry.checked_at_ms = now_ms;
      return it->second;
    }
    if (entry.inline_content) inline_bytes_ -= entry.size;
    entries_.erase(it);
  }
  Ref<CachedFile> entry = load(rel_path, {}, {});
  entry->checked_at_ms = now_ms;
  if (entries_.size() >= options_.max_entries) {
    // Evict an arbitrary entry: cheap, and a hot file comes back on its next request.
    auto victim = entries_.begin();
    if (victim->second->inline_content) inline_bytes_ -= victim->second->size;
    entries_.erase(victim);
  }
  entries_.emplace(std::string(rel_path), entry);
  return entry;
}

Ref<CachedFile> FileCache::load(std::string_view rel_path, std::string_view content_type_override,
                                std::string_view encoding) {
  Ref<CachedFile> entry(new CachedFile);
  int fd = open_beneath(rel_path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    // EXDEV/ELOOP: the path tried to leave the root through a symlink; EACCES: permissions.
    entry->kind = (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG)
                      ? CachedFile::Kind::kMissing
                      : CachedFile::Kind::kForbidden;
    return entry;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    entry->kind = CachedFile::Kind::kForbidden;
    return entry;
  }
  entry->dev = st.st_dev;
  entry->ino = st.st_ino;
  entry->mtime_ns = mtime_ns_of(st);
  entry->mtime = st.st_mtim.tv_sec;
  entry->size = static_cast<uint64_t>(st.st_size);
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    entry->kind = CachedFile::Kind::kDirectory;
    return entry;
  }
  if (!S_ISREG(st.st_mode)) {  // devices, FIFOs, sockets are never served
    ::close(fd);
    entry->kind = CachedFile::Kind::kForbidden;
    return entry;
  }
  entry->kind = CachedFile::Kind::kFile;
  if (entry->size <= options_.inline_limit &&
      inline_bytes_ + entry->size <= options_.inline_budget &&
      read_whole(fd, entry->content, entry->size)) {
    entry->inline_content = true;
    inline_bytes_ += entry->size;
    ::close(fd);
  } else {
    entry->content.clear();
    entry->file = Ref<BodyFile>(new BodyFile(fd));
  }
  entry->content_type = content_type_override.empty()
                            ? std::string(mime_.lookup(http::extension_of(rel_path)))
                            : std::string(content_type_override);

  bool vary = false;
  if (encoding.empty() && options_.precompressed) {
    std::string sibling(rel_path);
    sibling += ".br";
    Ref<CachedFile> br = load(sibling, entry->content_type, "br");
    if (br->kind == CachedFile::Kind::kFile) entry->brotli = br;
    sibling.replace(sibling.size() - 3, 3, ".gz");
    Ref<CachedFile> gz = load(sibling, entry->content_type, "gzip");
    if (gz->kind == CachedFile::Kind::kFile) entry->gzip = gz;
    vary = entry->brotli || entry->gzip;
  }
  if (encoding.empty() && options_.compress && options_.compress->enabled &&
      entry->size >= options_.compress->min_length &&
      compress::media_type_listed(entry->content_type, *options_.compress)) {
    entry->compressible = true;
    vary = true;
  }
  build_headers(*entry, encoding, vary || !encoding.empty());
  return entry;
}

void FileCache::build_headers(CachedFile& entry, std::string_view encoding, bool vary) {
  char date[32];
  size_t date_len = http::format_http_date(entry.mtime, date);
  if (options_.etag) {
    char etag[64];
    size_t etag_len =
        http::format_etag(static_cast<uint64_t>(entry.mtime_ns), entry.size, etag, sizeof etag);
    entry.etag.assign(etag, etag_len);
  }
  std::string& h = entry.headers;
  h.clear();
  h.append("Content-Type: ").append(entry.content_type).append("\r\n");
  if (!encoding.empty()) h.append("Content-Encoding: ").append(encoding).append("\r\n");
  entry.validators_offset = h.size();
  h.append("Last-Modified: ").append(date, date_len).append("\r\n");
  if (!entry.etag.empty()) h.append("ETag: ").append(entry.etag).append("\r\n");
  h.append("Accept-Ranges: bytes\r\n");
  if (vary) h.append("Vary: Accept-Encoding\r\n");
}

}  // namespace peregrine::static_files
