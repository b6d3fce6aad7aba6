// Log-linear bucketing (the HDR histogram idea), shared by peregrine-bench's latency histogram
// and the server's request-duration histogram (metrics/).
//
// Values below 2*S map to themselves; above, each power-of-two range [2^k, 2^(k+1)) is split into
// S = 2^Bits equal buckets, so a value is known to within 1/S of itself at any magnitude. Finding
// a bucket is one bit scan and a shift: no table, no loop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace peregrine {

template <int Bits>
struct LogLinear {
  static constexpr uint64_t kSubBuckets = uint64_t{1} << Bits;

  static constexpr size_t index_of(uint64_t value) {
    if (value < 2 * kSubBuckets) return static_cast<size_t>(value);
    const int shift = 63 - __builtin_clzll(value) - Bits;  // >= 1
    return static_cast<size_t>((static_cast<uint64_t>(shift) + 1) * kSubBuckets + (value >> shift) -
                               kSubBuckets);
  }
  // The smallest value that maps to `index`.
  static constexpr uint64_t lowest_of(size_t index) {
    if (index < 2 * kSubBuckets) return index;
    const uint64_t shift = index / kSubBuckets - 1;
    const uint64_t sub = index % kSubBuckets + kSubBuckets;
    return sub << shift;
  }
  // The largest value that maps to `index`.
  static constexpr uint64_t highest_of(size_t index) {
    if (index < 2 * kSubBuckets) return index;
    const uint64_t shift = index / kSubBuckets - 1;
    return lowest_of(index) + (uint64_t{1} << shift) - 1;
  }
};

}  // namespace peregrine
