#include "http2/hpack/decoder.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/strings.h"
#include "http2/hpack/huffman.h"
#include "http2/hpack/integer.h"

namespace peregrine::http2::hpack {

namespace {

// Bit 1: allowed in a name after its first byte: a lower-case token (RFC 9110 5.6.2, RFC 9113
// 8.2.1), so a name that HTTP/1.1 would split or read differently ("a b", "x(y)", "a/b") never
// reaches a handler or back end; bit 2: not allowed in a value. RFC 9113 8.2.1 forbids only NUL,
// CR and LF there, but every control byte but HTAB is outside RFC 9110's field-value, and our
// HTTP/1.1 parser refuses them: a value one protocol refuses must not pass through the other
// into an HTTP/1.1 back end that refuses it too (found by tests/fuzz/proxy_forwarding).
constexpr std::array<uint8_t, 256> build_char_classes() {
  std::array<uint8_t, 256> classes{};
  for (int c = 0x21; c < 0x7f; ++c)
    if (is_tchar(static_cast<unsigned char>(c)) && !(c >= 'A' && c <= 'Z')) classes[c] |= 1;
  for (int c = 0; c < 0x20; ++c)
    if (c != '\t') classes[c] |= 2;
  classes[0x7f] |= 2;
  return classes;
}
constexpr std::array<uint8_t, 256> kCharClasses = build_char_classes();

}  // namespace

bool valid_field(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  const auto* n = reinterpret_cast<const unsigned char*>(name.data());
  if (!(kCharClasses[n[0]] & 1) && n[0] != ':') return false;
  for (size_t i = 1; i < name.size(); ++i)
    if (!(kCharClasses[n[i]] & 1)) return false;
  if (value.empty()) return true;
  if (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' || value.back() == '\t')
    return false;
  for (unsigned char c : value)
    if (kCharClasses[c] & 2) return false;
  return true;
}

Decoder::Decoder(uint32_t max_table_size, size_t max_list_size)
    : table_(max_table_size), settings_table_size_(max_table_size), max_list_size_(max_list_size) {}

void Decoder::set_max_table_size(uint32_t max_table_size) {
  settings_table_size_ = max_table_size;
  if (max_table_size < table_.max_size()) update_required_ = true;
}

bool Decoder::lookup(uint32_t index, TableEntry& entry) const {
  if (index == 0) return false;
  if (index <= kStaticTableSize) {
    entry = kStaticTable[index];
    return true;
  }
  const uint32_t i = index - kStaticTableSize - 1;
  if (i >= table_.count()) return false;
  entry = table_.get(i);
  return true;
}

bool Decoder::read_string(const uint8_t*& p, const uint8_t* end, std::string_view& out) {
  if (p == end) return false;
  const bool huffman = *p & 0x80;
  uint32_t length;
  if (!decode_integer(p, end, 7, length) || length > static_cast<size_t>(end - p)) return false;
  if (!huffman) {
    out = std::string_view(reinterpret_cast<const char*>(p), length);
  } else {
    char* dst = scratch_.get() + scratch_used_;
    size_t decoded;
    if (!huffman_decode(p, length, dst, &decoded)) return false;
    out = std::string_view(dst, decoded);
    scratch_used_ += decoded;
  }
  p += length;
  return true;
}

DecodeResult Decoder::decode_block(std::string_view block, FieldFn on_field, void* context) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(block.data());
  const uint8_t* const end = p + block.size();
  // One field needs at most its Huffman text decoded plus a name copied out of the table.
  const size_t need = huffman_max_decoded_size(block.size()) +
                      std::max(table_.max_size(), settings_table_size_) + 1;
  if (need > scratch_capacity_) {
    scratch_.reset(new char[need]);
    scratch_capacity_ = need;
  }
  size_t list_size = 0;
  bool fields_started = false;
  while (p < end) {
    const uint8_t first = *p;
    if ((first & 0xe0) == 0x20) {
      // Dynamic table size update (RFC 7541 6.3): only before the first field, and within what
      // our SETTINGS allow (4.2).
      uint32_t size;
      if (fields_started || !decode_integer(p, end, 5, size) || size > settings_table_size_) {
        return DecodeResult::kCompressionError;
      }
      table_.set_max_size(size);
      update_required_ = false;
      continue;
    }
    if (update_required_) return DecodeResult::kCompressionError;
    fields_started = true;
    scratch_used_ = 0;
    Field field;
    if (first & 0x80) {  // indexed field (6.1)
      uint32_t index;
      TableEntry entry;
      if (!decode_integer(p, end, 7, index) || !lookup(index, entry)) {
        return DecodeResult::kCompressionError;
      }
      field.name = entry.name;
      field.value = entry.value;
      field.valid = entry.valid;
    } else {
      // Literal with incremental indexing (6.2.1), without indexing (6.2.2), never indexed
      // (6.2.3).
      const bool indexing = first & 0x40;
      field.never_indexed = !indexing && (first & 0x10);
      uint32_t index;
      if (!decode_integer(p, end, indexing ? 6 : 4, index)) return DecodeResult::kCompressionError;
      if (index != 0) {
        TableEntry entry;
        if (!lookup(index, entry)) return DecodeResult::kCompressionError;
        field.name = entry.name;
      } else if (!read_string(p, end, field.name)) {
        return DecodeResult::kCompressionError;
      }
      if (!read_string(p, end, field.value)) return DecodeResult::kCompressionError;
      field.valid = valid_field(field.name, field.value);
      if (indexing) {
        // The name may be the entry this insertion evicts (RFC 7541 4.4): copy it first.
        if (table_.holds(field.name.data())) {
          char* copy = scratch_.get() + scratch_used_;
          std::memcpy(copy, field.name.data(), field.name.size());
          field.name = std::string_view(copy, field.name.size());
          scratch_used_ += field.name.size();
        }
        table_.insert(field.name, field.value, field.valid);
      }
    }
    // Past the limit, the rest of the block is still decoded (cheaply: indexed fields copy
    // nothing) so the table stays in step with the peer's, but no field is passed on.
    list_size += field.name.size() + field.value.size() + kEntryOverhead;
    if (list_size <= max_list_size_) on_field(context, field);
  }
  return list_size > max_list_size_ ? DecodeResult::kHeaderListTooLarge : DecodeResult::kOk;
}

}  // namespace peregrine::http2::hpack
