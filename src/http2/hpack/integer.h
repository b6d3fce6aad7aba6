// HPACK integers (RFC 7541 5.1): an N-bit prefix in the first byte, then 7 bits per byte.
#pragma once

#include <cstdint>
#include <string>

namespace peregrine::http2::hpack {

// Larger integers are a decoding error (RFC 7541 5.1 lets a decoder refuse them): indexes,
// string lengths and table sizes are all far below it, and five continuation bytes can hold it.
inline constexpr uint32_t kMaxInteger = (uint32_t{1} << 31) - 1;

// Appends `value` with a `prefix_bits`-bit prefix; `pattern` holds the bits above the prefix.
inline void encode_integer(std::string& out, uint8_t pattern, int prefix_bits, uint32_t value) {
  const uint32_t max_prefix = (1u << prefix_bits) - 1;
  if (value < max_prefix) {
    out.push_back(static_cast<char>(pattern | value));
    return;
  }
  out.push_back(static_cast<char>(pattern | max_prefix));
  value -= max_prefix;
  while (value >= 128) {
    out.push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Decodes the integer at `p` (its first byte's high bits are the caller's) and advances `p`.
// False when the input ends inside it, or it exceeds kMaxInteger (overlong zero continuations
// included: at most five continuation bytes are read).
inline bool decode_integer(const uint8_t*& p, const uint8_t* end, int prefix_bits,
                           uint32_t& value) {
  const uint32_t max_prefix = (1u << prefix_bits) - 1;
  uint64_t v = *p++ & max_prefix;
  if (v < max_prefix) {
    value = static_cast<uint32_t>(v);
    return true;
  }
  for (int shift = 0; shift <= 28; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v += uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) {
      if (v > kMaxInteger) return false;
      value = static_cast<uint32_t>(v);
      return true;
    }
  }
  return false;
}

}  // namespace peregrine::http2::hpack
