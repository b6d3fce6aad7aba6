// Per-handler, per-worker cache of open files and their prebuilt response headers. A hit costs a
// hash lookup; the file's metadata is re-checked at most once per `valid` interval, so an edited
// file is noticed within that time while a hot file costs no system call at all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "compress/options.h"
#include "peregrine/ref_counted.h"
#include "peregrine/response.h"

namespace peregrine::static_files {

class MimeTable;

// A directory requests are resolved beneath. The descriptor is an O_PATH handle used with
// openat2(RESOLVE_BENEATH), so no request (nor a symlink) can reach outside it unless allowed.
struct Root {
  std::string path;  // absolute, no trailing slash
  int dir_fd = -1;
  bool symlinks_outside = false;
};

class CachedFile : public RefCounted {
 public:
  enum class Kind : uint8_t { kFile, kDirectory, kMissing, kForbidden };
  Kind kind = Kind::kMissing;
  uint64_t size = 0;
  time_t mtime = 0;
  std::string etag;     // with quotes; empty when ETags are off
  std::string content;  // the whole file, when small enough to keep in memory
  Ref<BodyFile> file;   // otherwise the open file, sent with sendfile
  bool inline_content = false;
  // "Content-Type: ...\r\n" (and Content-Encoding for a precompressed sibling) followed by the
  // validator lines (Last-Modified, ETag, Accept-Ranges, Vary) that a 304 repeats.
  std::string headers;
  size_t validators_offset = 0;
  std::string_view representation_lines() const {
    return std::string_view(headers).substr(0, validators_offset);
  }
  std::string_view validator_lines() const {
    return std::string_view(headers).substr(validators_offset);
  }
  std::string content_type;
  Ref<CachedFile> gzip;  // precompressed siblings, when present
  Ref<CachedFile> brotli;
  bool compressible = false;  // its type and size allow on-the-fly compression

  // Revalidation state.
  int64_t checked_at_ms = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
};

struct CacheOptions {
  bool etag = true;
  bool precompressed = true;
  int64_t valid_ms = 1000;
  size_t max_entries = 4096;
  size_t inline_limit = 64 * 1024;          // files up to this size are kept in memory...
  size_t inline_budget = 32 * 1024 * 1024;  // ...while the cache holds less than this in total
  // On-the-fly compression (null: off). Files it could compress get Vary: Accept-Encoding.
  const compress::Options* compress = nullptr;
};

class FileCache {
 public:
  FileCache(const Root& root, const MimeTable& mime, CacheOptions options);
  // `rel_path` starts with '/' and is already normalized. Never returns null.
  Ref<CachedFile> lookup(std::string_view rel_path, int64_t now_ms);
  // Opens `rel_path` beneath the root (read-only), honouring the symlink policy; -1 with errno.
  int open_beneath(std::string_view rel_path, int flags) const;

 private:
  Ref<CachedFile> load(std::string_view rel_path, std::string_view content_type_override,
                       std::string_view encoding);
  bool still_valid(const CachedFile& entry, std::string_view rel_path) const;
  void build_headers(CachedFile& entry, std::string_view encoding, bool vary);

  const Root& root_;
  const MimeTable& mime_;
  CacheOptions options_;
  struct PathHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Transparent lookup: a hit never builds a std::string.
  std::unordered_map<std::string, Ref<CachedFile>, PathHash, std::equal_to<>> entries_;
  size_t inline_bytes_ = 0;
};

// Reads `size` bytes of `fd` from offset 0 into `out` (pread, so a shared descriptor's offset
// stays put); false on an error or a file that shrank.
bool read_whole(int fd, std::string& out, size_t size);

}  // namespace peregrine::static_files
