// A 64-bit finalizer (xor-shift-multiply): every input bit reaches every output bit, so nearby
// inputs spread over the whole range. Stable across runs and platforms. The upstream balancer's
// hash strategies and the access limits' key tables use it.
#pragma once

#include <cstdint>

namespace peregrine {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace peregrine
