#include "handlers/static/variant_cache.h"

namespace peregrine::static_files {

Ref<Variant> VariantCache::find(const VariantKey& key, uint64_t size, int64_t mtime_ns) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return {};
  const Variant& v = *it->second.variant;
  if (v.source_size != size || v.source_mtime_ns != mtime_ns) {
    erase(it);  // the file changed since: never serve the old bytes
    return {};
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.variant;
}

void VariantCache::insert(const VariantKey& key, Ref<Variant> variant) {
  auto it = entries_.find(key);
  if (it != entries_.end()) erase(it);
  const size_t c = cost(*variant);
  if (c > max_bytes_) return;
  while (bytes_ + c > max_bytes_ && !lru_.empty()) erase(entries_.find(lru_.back()));
  lru_.push_front(key);
  entries_.emplace(key, Entry{std::move(variant), lru_.begin()});
  bytes_ += c;
}

void VariantCache::erase(std::unordered_map<VariantKey, Entry, KeyHash>::iterator it) {
  bytes_ -= cost(*it->second.variant);
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

}  // namespace peregrine::static_files
