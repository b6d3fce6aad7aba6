#include "loadgen/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace peregrine::loadgen {
namespace {

TEST(Histogram, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 0; v < 2048; ++v) {
    EXPECT_EQ(Histogram::index_of(v), v);
    EXPECT_EQ(Histogram::lowest_of(v), v);
    EXPECT_EQ(Histogram::highest_of(v), v);
  }
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_EQ(h.percentile(50), 50u);
  EXPECT_EQ(h.percentile(99), 99u);
  EXPECT_EQ(h.percentile(100), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
  EXPECT_NEAR(h.stddev(), 28.866, 0.001);
}

TEST(Histogram, BucketsTileTheRangeWithBoundedError) {
  for (size_t i = 1; i < Histogram::bucket_count(); ++i) {
    ASSERT_EQ(Histogram::lowest_of(i), Histogram::highest_of(i - 1) + 1) << i;
    const uint64_t lo = Histogram::lowest_of(i), hi = Histogram::highest_of(i);
    ASSERT_EQ(Histogram::index_of(lo), i);
    ASSERT_EQ(Histogram::index_of(hi), i);
    ASSERT_LE(static_cast<double>(hi - lo), static_cast<double>(lo) / 1024.0 + 1e-9) << i;
  }
  EXPECT_EQ(Histogram::index_of(Histogram::kMaxValue), Histogram::bucket_count() - 1);
}

TEST(Histogram, PercentilesWithinPrecisionOfExact) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(7.0, 1.5);
  std::vector<uint64_t> values;
  Histogram h;
  for (int i = 0; i < 100000; ++i) {
    auto v = static_cast<uint64_t>(dist(rng));
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
    auto rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
    uint64_t exact = values[rank - 1];
    uint64_t got = h.percentile(p);
    EXPECT_GE(got, exact) << p;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * 1.001 + 1) << p;
  }
  EXPECT_EQ(h.max(), values.back());
  EXPECT_EQ(h.min(), values.front());
}

TEST(Histogram, MergeAddsAndClearEmpties) {
  Histogram a, b;
  a.record(10, 3);
  b.record(1'000'000);
  b.record(5);
  a.merge(b);
  EXPECT_EQ(a.count(), 5u);
  EXPECT_EQ(a.min(), 5u);
  EXPECT_EQ(a.max(), 1'000'000u);
  EXPECT_EQ(a.buckets().size(), 3u);
  a.clear();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.percentile(50), 0u);
  EXPECT_EQ(a.min(), 0u);
}

TEST(Histogram, HugeValuesAreClamped) {
  Histogram h;
  h.record(UINT64_MAX);
  EXPECT_EQ(h.max(), Histogram::kMaxValue);
  EXPECT_EQ(h.percentile(50), Histogram::kMaxValue);
}

}  // namespace
}  // namespace peregrine::loadgen
