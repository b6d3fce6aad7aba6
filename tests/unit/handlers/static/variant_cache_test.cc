#include "handlers/static/variant_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine::static_files {
namespace {

using compress::Coding;

Ref<Variant> made(size_t bytes, uint64_t size = 100, int64_t mtime = 1) {
  Ref<Variant> v(new Variant);
  v->body.assign(bytes, 'x');
  v->source_size = size;
  v->source_mtime_ns = mtime;
  return v;
}

VariantKey key(ino_t ino, Coding coding = Coding::kGzip, int level = 6) {
  return VariantKey{1, ino, coding, level};
}

TEST(VariantCache, FindsByIdentityCodingAndLevel) {
  VariantCache cache(1 << 20);
  cache.insert(key(1), made(10));
  EXPECT_TRUE(cache.find(key(1), 100, 1));
  EXPECT_FALSE(cache.find(key(1, Coding::kBrotli), 100, 1));
  EXPECT_FALSE(cache.find(key(1, Coding::kGzip, 1), 100, 1));
  EXPECT_FALSE(cache.find(key(2), 100, 1));
}

TEST(VariantCache, AChangedFileDropsItsVariant) {
  VariantCache cache(1 << 20);
  cache.insert(key(1), made(10, 100, 1));
  EXPECT_FALSE(cache.find(key(1), 100, 2));  // new mtime
  EXPECT_EQ(cache.size(), 0u);               // dropped, not only skipped
  EXPECT_EQ(cache.bytes(), 0u);
  cache.insert(key(1), made(10, 100, 1));
  EXPECT_FALSE(cache.find(key(1), 101, 1));  // new size
  EXPECT_EQ(cache.size(), 0u);
}

TEST(VariantCache, StaysWithinItsBudgetDroppingTheLeastRecentlyUsed) {
  VariantCache cache(10'000);
  for (ino_t i = 1; i <= 4; ++i) cache.insert(key(i), made(2000));
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_TRUE(cache.find(key(1), 100, 1));  // 1 is now the most recent; 2 the least
  cache.insert(key(5), made(2000));         // over budget: 2 goes
  EXPECT_LE(cache.bytes(), 10'000u);
  EXPECT_TRUE(cache.find(key(1), 100, 1));
  EXPECT_FALSE(cache.find(key(2), 100, 1));
  EXPECT_TRUE(cache.find(key(3), 100, 1));
  EXPECT_TRUE(cache.find(key(5), 100, 1));
  for (ino_t i = 10; i < 100; ++i) {
    cache.insert(key(i), made(1000 + i));
    ASSERT_LE(cache.bytes(), 10'000u);
  }
  EXPECT_TRUE(cache.find(key(99), 100, 1));
}

TEST(VariantCache, AVariantLargerThanTheBudgetIsNotKept) {
  VariantCache cache(1000);
  cache.insert(key(1), made(100));
  cache.insert(key(2), made(5000));
  EXPECT_FALSE(cache.find(key(2), 100, 1));
  EXPECT_TRUE(cache.find(key(1), 100, 1));
}

TEST(VariantCache, ReplacingAVariantKeepsTheAccountingRight) {
  VariantCache cache(1 << 20);
  cache.insert(key(1), made(100));
  const size_t one = cache.bytes();
  cache.insert(key(1), made(100));
  EXPECT_EQ(cache.bytes(), one);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace peregrine::static_files
