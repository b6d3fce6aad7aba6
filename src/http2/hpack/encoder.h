// HPACK encoder (RFC 7541 6): one connection's encoding context. Static-table matches come
// from a compile-time hash, repeated fields from a small hash index over the dynamic table, and
// strings are Huffman-coded only when that is shorter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http2/hpack/tables.h"

namespace peregrine::http2::hpack {

class Encoder {
 public:
  // `max_table_size`: the most dynamic-table memory we are willing to keep for the peer (the
  // table is min of this and the peer's SETTINGS_HEADER_TABLE_SIZE, 4096 until it says).
  explicit Encoder(uint32_t max_table_size = 4096);

  // The peer's SETTINGS_HEADER_TABLE_SIZE. Call between blocks: a change is signalled at the
  // start of the next block (RFC 7541 4.2), the smallest size first if it went down and up.
  void set_peer_max_table_size(uint32_t size);

  // Appends one field of the current block. `name` is lower case. `sensitive` fields are sent
  // as never-indexed literals (RFC 7541 7.1.3) so no intermediary indexes them either. The
  // first call of a block emits any pending table size update, so a block's fields must be
  // encoded without a SETTINGS change in between (and an empty block carries none: the update
  // goes in the next block with a field, which is every HTTP/2 header block in practice).
  void encode(std::string& out, std::string_view name, std::string_view value,
              bool sensitive = false);

  const DynamicTable& table() const { return table_; }

  // Changes whenever the table or a pending size update does: the encoding of a field list
  // depends on nothing else, so a block encoded without changing it encodes to the same bytes
  // again while it stays the same (Session reuses such blocks).
  uint64_t version() const { return version_; }

 private:
  struct Slot {
    uint32_t hash;
    uint32_t id;  // DynamicTable id; kEmpty when unused
  };
  static constexpr uint32_t kEmpty = 0xffffffff;

  void emit_size_updates(std::string& out);
  void encode_literal(std::string& out, std::string_view name, std::string_view value,
                      bool sensitive, uint32_t hash);
  // The dynamic index (RFC numbering, 62 and up) of `name: value`, or 0.
  uint32_t find_dynamic(uint32_t hash, std::string_view name, std::string_view value) const;
  void index_inserted(uint32_t hash);
  void rebuild_index();
  bool live(uint32_t id) const { return table_.next_id() - 1 - id < table_.count(); }

  DynamicTable table_;
  uint32_t own_max_;
  uint32_t target_size_;         // min(own_max_, the peer's setting)
  uint32_t lowest_pending_ = 0;  // the smallest target since the last block
  bool update_pending_ = false;
  std::vector<Slot> slots_;  // open addressing, linear probing
  uint32_t used_slots_ = 0;  // live or stale; rebuilt past 3/4
  uint64_t version_ = 0;
};

}  // namespace peregrine::http2::hpack
