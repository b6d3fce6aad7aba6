// A log-linear latency histogram (the HDR histogram idea, written for peregrine-bench).
//
// Values are integers (the bench records microseconds). Values below 2*S are counted exactly;
// above, each power-of-two range [2^k, 2^(k+1)) is split into S equal buckets, so a recorded
// value is known to within 1/S of itself (S = 1024: 0.1 %) at any magnitude, in a fixed array
// of about 27,000 counters. Recording is an index computation and an increment: no allocation,
// no branch on the magnitude beyond one bit scan. Histograms merge by adding counters, which is
// how the per-thread histograms of the load generator become one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/log_linear.h"

namespace peregrine::loadgen {

class Histogram {
 public:
  static constexpr int kSubBucketBits = 10;  // S = 1024 buckets per power of two
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;
  static constexpr int kMaxValueBits = 36;  // 2^36 us: 19 hours; larger is clamped
  static constexpr uint64_t kMaxValue = (uint64_t{1} << kMaxValueBits) - 1;

  Histogram();

  void record(uint64_t value, uint64_t count = 1) {
    if (value > kMaxValue) value = kMaxValue;
    counts_[index_of(value)] += count;
    total_ += count;
    if (value < min_) min_ = value;
    if (value > max_) max_ = value;
    const double v = static_cast<double>(value);
    sum_ += v * static_cast<double>(count);
    sum_squares_ += v * v * static_cast<double>(count);
  }

  void merge(const Histogram& other);
  void clear();

  uint64_t count() const { return total_; }
  uint64_t min() const { return total_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return total_ ? sum_ / static_cast<double>(total_) : 0.0; }
  double stddev() const;  // population standard deviation, as ab reports it

  // The value at or below which `percent` % of the recorded values lie (0 < percent <= 100):
  // the highest value of the bucket reaching that rank, clamped to [min(), max()]. 0 when empty.
  uint64_t percentile(double percent) const;

  // Non-empty buckets as (highest value in the bucket, count), ascending: for plots and merging.
  std::vector<std::pair<uint64_t, uint64_t>> buckets() const;

  using Buckets = LogLinear<kSubBucketBits>;
  static size_t index_of(uint64_t value) { return Buckets::index_of(value); }
  static uint64_t lowest_of(size_t index) { return Buckets::lowest_of(index); }
  static uint64_t highest_of(size_t index) { return Buckets::highest_of(index); }
  static size_t bucket_count() { return index_of(kMaxValue) + 1; }

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double sum_ = 0;
  double sum_squares_ = 0;
};

}  // namespace peregrine::loadgen
