// HPACK's two tables (RFC 7541 2.3): the static table (Appendix A) with a compile-time hash for
// the encoder's lookups, and the dynamic table both the decoder and the encoder keep.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace peregrine::http2::hpack {

struct TableEntry {
  std::string_view name;
  std::string_view value;
  // The decoder's verdict on the field's characters when it was inserted (valid_field in
  // decoder.h), kept so an indexed field is not checked again. Static entries are valid.
  bool valid = true;
};

inline constexpr uint32_t kStaticTableSize = 61;
// Index 1..61 (index 0 is unused, as in the RFC's numbering).
extern const TableEntry kStaticTable[kStaticTableSize + 1];

// RFC 7541 4.1: an entry's size is its name and value lengths plus 32.
inline constexpr uint32_t kEntryOverhead = 32;

struct StaticMatch {
  uint32_t name_index = 0;   // the first entry with this name, 0 if none
  uint32_t field_index = 0;  // an entry with this name and value, 0 if none
};

// Finds `name` (lower case) and `name: value` in the static table: one hash probe, one compare.
StaticMatch find_static(std::string_view name, std::string_view value);

// The dynamic table: entries in insertion order, newest first for lookups (RFC 7541 2.3.3).
// Names and values live back to back in one byte buffer that is appended to and compacted when
// its end is reached (at most twice the table size, so compaction is amortized); the entries'
// offsets sit in a ring. Evicting an entry moves no bytes.
class DynamicTable {
 public:
  explicit DynamicTable(uint32_t max_size);

  uint32_t max_size() const { return max_size_; }
  uint32_t size() const { return size_; }
  uint32_t count() const { return count_; }
  // Entry `i`, 0 the newest. The views stay valid until the next insert or set_max_size.
  TableEntry get(uint32_t i) const {
    const Slot& s = ring_[(head_ + count_ - 1 - i) & ring_mask_];
    return {std::string_view(bytes_.data() + s.offset, s.name_size),
            std::string_view(bytes_.data() + s.offset + s.name_size, s.value_size), s.valid};
  }
  // Identifiers that count insertions (they wrap): the newest entry is next_id() - 1, and
  // entry `id` is live while next_id() - 1 - id < count().
  uint32_t next_id() const { return next_id_; }

  // Evicts down to the new size (RFC 7541 4.3).
  void set_max_size(uint32_t max_size);
  // Adds an entry, evicting the oldest ones first (RFC 7541 4.4); an entry larger than the
  // table empties it and is not added (returns false). `name` and `value` must not point into
  // this table. `valid` is handed back with the entry (TableEntry::valid).
  bool insert(std::string_view name, std::string_view value, bool valid = true);
  // True when `p` points into the table's bytes (a name taken from an entry).
  bool holds(const char* p) const {
    return !bytes_.empty() && p >= bytes_.data() && p < bytes_.data() + bytes_.size();
  }

 private:
  struct Slot {
    uint32_t offset;
    uint32_t name_size;
    uint32_t value_size;
    bool valid;
  };
  void evict_oldest();

  uint32_t max_size_;
  uint32_t size_ = 0;
  uint32_t count_ = 0;
  uint32_t head_ = 0;  // ring index of the oldest entry
  uint32_t ring_mask_ = 0;
  uint32_t end_ = 0;  // end of the newest entry's bytes
  uint32_t next_id_ = 0;
  std::vector<Slot> ring_;
  std::vector<char> bytes_;
};

}  // namespace peregrine::http2::hpack
