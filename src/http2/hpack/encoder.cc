#include "http2/hpack/encoder.h"

#include <algorithm>
#include <cstring>

#include "http2/hpack/huffman.h"
#include "http2/hpack/integer.h"

namespace peregrine::http2::hpack {

namespace {

// RFC 9113 6.5.2's initial SETTINGS_HEADER_TABLE_SIZE: what the peer's decoder starts with.
constexpr uint32_t kDefaultTableSize = 4096;

uint32_t load4(const char* p) {
  uint32_t word;
  std::memcpy(&word, p, 4);
  return word;
}

uint64_t load8(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, 8);
  return word;
}

// Samples a string: its length, and its first, middle and last eight bytes. Values that differ
// elsewhere collide, which costs a compare, not a wrong answer (lookups compare the strings).
[[gnu::always_inline]] inline uint64_t sample(std::string_view s) {
  const size_t n = s.size();
  if (n >= 8) {
    return load8(s.data()) ^ (load8(s.data() + n / 2 - 4) * 0xff51afd7ed558ccdull) ^
           (load8(s.data() + n - 8) << 17) ^ n;
  }
  if (n >= 4) return load4(s.data()) | (uint64_t{load4(s.data() + n - 4)} << 32) | n << 60;
  uint64_t word = n;
  for (size_t i = 0; i < n; ++i) word = (word << 8) | static_cast<unsigned char>(s[i]);
  return word;
}

// Equality without a call to memcmp for the short strings most fields are made of. Up to 32
// bytes: dates (29), content types and entity tags are 17-32, and the memcmp calls for them
// were 2 % of the server's CPU time over HTTP/2 (perf, h2load -c100 -m10).
[[gnu::always_inline]] inline bool same(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n >= 8 && n <= 16) {
    return load8(a.data()) == load8(b.data()) && load8(a.data() + n - 8) == load8(b.data() + n - 8);
  }
  if (n > 16 && n <= 32) {
    return load8(a.data()) == load8(b.data()) && load8(a.data() + 8) == load8(b.data() + 8) &&
           load8(a.data() + n - 16) == load8(b.data() + n - 16) &&
           load8(a.data() + n - 8) == load8(b.data() + n - 8);
  }
  if (n >= 4 && n < 8) {
    return load4(a.data()) == load4(b.data()) && load4(a.data() + n - 4) == load4(b.data() + n - 4);
  }
  return a == b;
}

uint32_t field_hash(std::string_view name, std::string_view value) {
  uint64_t h = (sample(name) * 0x9e3779b97f4a7c15ull) ^ sample(value);
  h *= 0xc4ceb9fe1a85ec53ull;
  return static_cast<uint32_t>(h >> 32);
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
  ++version_;
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
  ++version_;
}

uint32_t Encoder::find_dynamic(uint32_t hash, std::string_view name, std::string_view value) const {
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (uint32_t h = hash & mask;; h = (h + 1) & mask) {
    const Slot& slot = slots_[h];
    if (slot.id == kEmpty) return 0;
    if (slot.hash == hash && live(slot.id)) {
      const uint32_t i = table_.next_id() - 1 - slot.id;
      const TableEntry entry = table_.get(i);
      if (same(entry.value, value) && same(entry.name, name)) return kStaticTableSize + 1 + i;
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
  // Fast path, a field the dynamic table holds: one hash, one probe, one byte. Pseudo-header
  // fields skip it: they are the ones the static table matches whole (never added to the
  // dynamic table).
  const uint32_t hash = field_hash(name, value);
  if (!sensitive && table_.count() > 0 && (name.empty() || name[0] != ':')) {
    if (const uint32_t index = find_dynamic(hash, name, value)) {
      if (index < 127) {
        out.push_back(static_cast<char>(0x80 | index));
      } else {
        encode_integer(out, 0x80, 7, index);
      }
      return;
    }
  }
  encode_literal(out, name, value, sensitive, hash);
}

void Encoder::encode_literal(std::string& out, std::string_view name, std::string_view value,
                             bool sensitive, uint32_t hash) {
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
  // A pseudo-header field the static table did not match whole may be in the dynamic one.
  if (!name.empty() && name[0] == ':' && table_.count() > 0) {
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
  if (!indexing) return;
  ++version_;  // inserted, or (too big to fit) emptied the table
  if (table_.insert(name, value)) index_inserted(hash);
}

}  // namespace peregrine::http2::hpack
