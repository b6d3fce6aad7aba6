// Compressed variants of static files, made once and kept: the first client that accepts br
// (say) pays for compressing a file, every later one gets the stored bytes with a
// Content-Length, like a precompressed sibling. nginx compresses the same file again for every
// request; this is where a static site's CPU goes.
//
// One cache per static handler per worker (no locks). Bounded in bytes, least recently used out
// first. A variant is found by the file's identity (device, inode) plus coding and level, and is
// only used while the file's size and mtime still match: a changed file drops its old variant
// on the next lookup.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "compress/coding.h"
#include "peregrine/ref_counted.h"

namespace peregrine::static_files {

struct VariantKey {
  dev_t dev = 0;
  ino_t ino = 0;
  compress::Coding coding = compress::Coding::kIdentity;
  int level = 0;
  bool operator==(const VariantKey&) const = default;
};

class Variant : public RefCounted {
 public:
  uint64_t source_size = 0;  // the file's size and mtime it was made from
  int64_t source_mtime_ns = 0;
  std::string body;  // the compressed bytes
  // "Content-Type: ...\r\nContent-Encoding: ...\r\n", then the validator lines a 304 repeats
  // (Last-Modified, ETag, Vary).
  std::string headers;
  size_t validators_offset = 0;
  std::string etag;  // distinct from the file's: "<file etag>-br"
  std::string_view validator_lines() const {
    return std::string_view(headers).substr(validators_offset);
  }
};

class VariantCache {
 public:
  explicit VariantCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  // The variant for `key` made from a file of this size and mtime; null when missing or stale
  // (a stale one is dropped).
  Ref<Variant> find(const VariantKey& key, uint64_t size, int64_t mtime_ns);
  // Stores `variant` (replacing any for `key`) and evicts the least recently used ones beyond
  // the budget. A variant larger than the whole budget is not kept.
  void insert(const VariantKey& key, Ref<Variant> variant);

  size_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }
  size_t max_bytes() const { return max_bytes_; }

 private:
  struct KeyHash {
    size_t operator()(const VariantKey& k) const {
      return std::hash<uint64_t>{}(static_cast<uint64_t>(k.ino) * 31 + k.dev) ^
             (static_cast<size_t>(k.coding) << 8) ^ static_cast<size_t>(k.level);
    }
  };
  struct Entry {
    Ref<Variant> variant;
    std::list<VariantKey>::iterator lru;  // position in lru_ (front: most recent)
  };
  static size_t cost(const Variant& v) { return v.body.size() + v.headers.size() + 128; }
  void erase(std::unordered_map<VariantKey, Entry, KeyHash>::iterator it);

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::list<VariantKey> lru_;
  std::unordered_map<VariantKey, Entry, KeyHash> entries_;
};

}  // namespace peregrine::static_files
