// Word-at-a-time scanning shared by the HTTP/1 request and response parsers: they run over
// every byte of every head, and a branch per byte costs several instructions where eight bytes
// at a time cost about one. GCC does not vectorize these loops at -O2 by itself.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace peregrine::http1::word_scan {

// Each mask function returns bit 7 set in the bytes of x that match. A borrow or carry can flag
// a byte above a true match, never below one, so the lowest set bit is exact: that is all the
// callers use (little-endian: the lowest bit is the first byte in memory).
constexpr bool kLittleEndian = std::endian::native == std::endian::little;
constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHigh = 0x8080808080808080ULL;

inline uint64_t Load8(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}
inline uint64_t BytesBelow(uint64_t x, uint8_t n) {
  return (x - n * kOnes) & ~x & kHigh;
}
inline uint64_t BytesEqual(uint64_t x, uint8_t c) {
  const uint64_t v = x ^ (c * kOnes);
  return (v - kOnes) & ~v & kHigh;
}
inline uint64_t BytesAtLeast7F(uint64_t x) {
  return ((x + kOnes) | x) & kHigh;
}
inline size_t FirstByte(uint64_t mask) {
  return static_cast<size_t>(std::countr_zero(mask)) >> 3;
}

// The first byte from `p` that a field value may not hold (RFC 9110 5.5: HTAB, SP, VCHAR and
// obs-text are allowed): the CR or LF that ends the line, or an invalid control byte. The head
// must hold such a byte before `end` (it ends with a line end), so the tail loop needs no bound.
inline const char* SkipFieldValue(const char* p, const char* end) {
  if constexpr (kLittleEndian) {
    while (end - p >= 8) {
      const uint64_t m = BytesBelow(Load8(p), 0x20) | BytesEqual(Load8(p), 0x7f);
      if (m == 0) {
        p += 8;
        continue;
      }
      p += FirstByte(m);
      if (*p != '\t') return p;
      ++p;
    }
  }
  for (;; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return p;
  }
}

}  // namespace peregrine::http1::word_scan
