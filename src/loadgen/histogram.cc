#include "loadgen/histogram.h"

#include <algorithm>
#include <cmath>

namespace peregrine::loadgen {

Histogram::Histogram() : counts_(bucket_count(), 0) {}

void Histogram::merge(const Histogram& other) {
  if (other.total_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
  if (other.min_ < min_) min_ = other.min_;
  if (other.max_ > max_) max_ = other.max_;
  sum_ += other.sum_;
  sum_squares_ += other.sum_squares_;
}

void Histogram::clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  total_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  sum_ = sum_squares_ = 0;
}

double Histogram::stddev() const {
  if (total_ < 2) return 0.0;
  const double n = static_cast<double>(total_);
  const double m = sum_ / n;
  const double var = sum_squares_ / n - m * m;
  return var > 0 ? std::sqrt(var) : 0.0;
}

uint64_t Histogram::percentile(double percent) const {
  if (total_ == 0) return 0;
  if (percent >= 100.0) return max_;
  if (percent < 0) percent = 0;
  // Rank of the wanted value, 1-based: the smallest rank r with r >= percent% of total.
  uint64_t rank = static_cast<uint64_t>(std::ceil(percent / 100.0 * static_cast<double>(total_)));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      uint64_t v = highest_of(i);
      if (v > max_) v = max_;
      if (v < min_) v = min_;
      return v;
    }
  }
  return max_;
}

std::vector<std::pair<uint64_t, uint64_t>> Histogram::buckets() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i]) out.emplace_back(highest_of(i), counts_[i]);
  }
  return out;
}

}  // namespace peregrine::loadgen
