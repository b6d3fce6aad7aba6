#include "http2/hpack/encoder.h"

#include <algorithm>
#include <cstring>

#include "http2/hpack/huffman.h"
#include "http2/hpack/integer.h"

namespace peregrine::http2::hpack {

namespace {

// RFC 9113 6.5.2's initial SETTINGS_HEADER_TABLE_SIZE: what the peer's decoder starts with.
constexpr uint32_t kDefaultTableSize = 4096;

uint64_t mix(uint64_t h, std::string_view s) {
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ull;
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h = (h ^ word) * kMultiplier;
    h ^= h >> 29;
  }
  uint64_t tail = uint64_t{n} << 56;
  for (size_t i = 0; i < n; ++i) tail |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  h = (h ^ tail) * kMultiplier;
  return h ^ (h >> 32);
}

uint32_t field_hash(std::string_view name, std::string_view value) {
  return static_cast<uint32_t>(mix(mix(0, name), value));
}

// Fields whose values rarely repeat: indexing them would only push useful entries out.
bool unique_per_message(std::string_view name) {
  return name == ":path" || name == "age" || name == "content-range" || name == "location" ||
         name == "set-cookie" || name == "x-request-id";
}

void append_string(std::string& out, std::string_view s) {
  const size_t huffman_size = huffman_encoded_size(s);
  if (huffman_size < s.size()) {
    encode_integer(out, 0x80, 7, static_cast<uint32_t>(huffman_size));
    const size_t at = out.size();
    out.resize(at + huffman_size);
    huffman_encode(s, out.data() + at);
  } else {
    encode_integer(out, 0x00, 7, static_cast<uint32_t>(s.size()));
    out.append(s);
  }
}

}  // namespace

Encoder::Encoder(uint32_t max_table_size)
    : table_(std::min(max_table_size, kDefaultTableSize)),
      own_max_(max_table_size),
      target_size_(std::min(max_table_size, kDefaultTableSize)) {
  if (target_size_ < kDefaultTableSize) {  // the peer's decoder starts at 4096: tell it
    update_pending_ = true;
    lowest_pending_ = target_size_;
  }
  // Twice as many slots as entries can fit, so probes stay short.
  uint32_t slots = 8;
  while (slots < 2 * (own_max_ / kEntryOverhead)) slots <<= 1;
  slots_.assign(slots, Slot{0, kEmpty});
}

void Encoder::set_peer_max_table_size(uint32_t size) {
  const uint32_t target = std::min(own_max_, size);
  if (target == target_size_ && !update_pending_) return;
  lowest_pending_ = update_pending_ ? std::min(lowest_pending_, target) : target;
  update_pending_ = true;
  target_size_ = target;
  // Mirror what the peer's decoder will do on reading the updates: evict down to the lowest.
  table_.set_max_size(lowest_pending_);
  table_.set_max_size(target_size_);
}

void Encoder::emit_size_updates(std::string& out) {
  if (lowest_pending_ < target_size_) encode_integer(out, 0x20, 5, lowest_pending_);
  encode_integer(out, 0x20, 5, target_size_);
  update_pending_ = false;
}

uint32_t Encoder::find_dynamic(uint32_t hash, std::string_view name, std::string_view value) const {
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (uint32_t h = hash & mask;; h = (h + 1) & mask) {
    const Slot& slot = slots_[h];
    if (slot.id == kEmpty) return 0;
    if (slot.hash == hash && live(slot.id)) {
      const uint32_t i = table_.next_id() - 1 - slot.id;
      const TableEntry entry = table_.get(i);
      if (entry.name == name && entry.value == value) return kStaticTableSize + 1 + i;
    }
  }
}

void Encoder::index_inserted(uint32_t hash) {
  if (4 * (used_slots_ + 1) > 3 * slots_.size()) {
    rebuild_index();
    return;  // the rebuild indexed the new entry too
  }
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (uint32_t h = hash & mask;; h = (h + 1) & mask) {
    Slot& slot = slots_[h];
    if (slot.id == kEmpty || !live(slot.id)) {
      // A stale slot (its entry was evicted) is reused; it never ends a probe chain.
      if (slot.id == kEmpty) ++used_slots_;
      slot = {hash, table_.next_id() - 1};
      return;
    }
  }
}

void Encoder::rebuild_index() {
  std::fill(slots_.begin(), slots_.end(), Slot{0, kEmpty});
  used_slots_ = 0;
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (uint32_t i = 0; i < table_.count(); ++i) {
    const TableEntry entry = table_.get(i);
    const uint32_t hash = field_hash(entry.name, entry.value);
    uint32_t h = hash & mask;
    while (slots_[h].id != kEmpty) h = (h + 1) & mask;
    slots_[h] = {hash, table_.next_id() - 1 - i};
    ++used_slots_;
  }
}

void Encoder::encode(std::string& out, std::string_view name, std::string_view value,
                     bool sensitive) {
  if (update_pending_) emit_size_updates(out);
  const StaticMatch match = find_static(name, value);
  if (sensitive) {  // never indexed (RFC 7541 6.2.3), the name may still come from the table
    encode_integer(out, 0x10, 4, match.name_index);
    if (match.name_index == 0) append_string(out, name);
    append_string(out, value);
    return;
  }
  if (match.field_index != 0) {
    encode_integer(out, 0x80, 7, match.field_index);
    return;
  }
  const uint32_t hash = field_hash(name, value);
  if (table_.count() > 0) {
    if (const uint32_t index = find_dynamic(hash, name, value)) {
      encode_integer(out, 0x80, 7, index);
      return;
    }
  }
  // Index what may repeat and leaves room for several entries (RFC 7541 6.2.1), else a literal
  // without indexing (6.2.2).
  const bool indexing = !unique_per_message(name) &&
                        4 * (name.size() + value.size() + kEntryOverhead) <= table_.max_size();
  encode_integer(out, indexing ? 0x40 : 0x00, indexing ? 6 : 4, match.name_index);
  if (match.name_index == 0) append_string(out, name);
  append_string(out, value);
  if (indexing && table_.insert(name, value)) index_inserted(hash);
}

}  // namespace peregrine::http2::hpack
