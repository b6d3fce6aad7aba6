// HPACK decoder (RFC 7541 3, 6): one connection's decoding context. Pure: bytes of one whole
// header block in (the caller joins HEADERS and CONTINUATION fragments), fields out through a
// callback, a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>

#include "http2/hpack/tables.h"

namespace peregrine::http2::hpack {

struct Field {
  std::string_view name;
  std::string_view value;
  bool never_indexed = false;  // the sender marked it sensitive (RFC 7541 6.2.3): keep it so
  bool valid = false;          // valid_field(name, value), remembered by the table for indexed ones
};

// RFC 9113 8.2.1's character rules: a nonempty name of lower-case token characters (a leading
// ':' for pseudo-headers), a value without NUL, CR or LF and without leading or trailing space
// or tab. HPACK itself carries any bytes; the decoder applies these because a field a client
// indexes once is usually sent as an index from then on, and the table keeps the verdict.
bool valid_field(std::string_view name, std::string_view value);

enum class DecodeResult {
  kOk,
  // The decoded list exceeds the header-list limit (names + values + 32 per field, RFC 9113
  // 6.5.2). The block was still decoded to its end, so the dynamic table matches the peer's:
  // a stream error (answer 431 or reset the stream), the connection goes on.
  kHeaderListTooLarge,
  // Malformed block: the decoding context is lost, a connection error COMPRESSION_ERROR
  // (RFC 9113 4.3).
  kCompressionError,
};

class Decoder {
 public:
  // `max_table_size`: the table size both sides start with (HTTP/2's initial
  // SETTINGS_HEADER_TABLE_SIZE, 4096); a value we announce goes through set_max_table_size once
  // the peer acknowledged it. `max_list_size`: our header-list limit.
  explicit Decoder(uint32_t max_table_size = 4096, size_t max_list_size = 65536);

  // Once the peer acknowledged SETTINGS with a new SETTINGS_HEADER_TABLE_SIZE. A lower value
  // than the table's current size obliges the peer to open its next block with a size update.
  void set_max_table_size(uint32_t max_table_size);
  void set_max_list_size(size_t bytes) { max_list_size_ = bytes; }

  // Decodes one block, calling on_field(const Field&) for each field in order. The views are
  // valid only during the call (they point into `block`, the dynamic table or a scratch buffer
  // that the next field reuses). Fields are passed until the list limit is reached; none after.
  template <class OnField>
  DecodeResult decode(std::string_view block, OnField&& on_field) {
    using F = std::remove_reference_t<OnField>;
    return decode_block(
        block, [](void* context, const Field& field) { (*static_cast<F*>(context))(field); },
        &on_field);
  }

  const DynamicTable& table() const { return table_; }

 private:
  using FieldFn = void (*)(void* context, const Field& field);
  DecodeResult decode_block(std::string_view block, FieldFn on_field, void* context);
  bool read_string(const uint8_t*& p, const uint8_t* end, std::string_view& out);
  bool lookup(uint32_t index, TableEntry& entry) const;

  DynamicTable table_;
  uint32_t settings_table_size_;
  bool update_required_ = false;
  size_t max_list_size_;
  // Huffman-decoded text and names copied out of the table, reused field after field. Sized at
  // the start of a block for the worst case, so it never grows inside one.
  std::unique_ptr<char[]> scratch_;
  size_t scratch_capacity_ = 0;
  size_t scratch_used_ = 0;
};

}  // namespace peregrine::http2::hpack
