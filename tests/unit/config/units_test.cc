#include "config/units.h"

#include <gtest/gtest.h>

namespace peregrine::config {
namespace {

using std::chrono::milliseconds;

TEST(Units, DurationForms) {
  milliseconds d{};
  ASSERT_TRUE(parse_duration("500ms", &d));
  EXPECT_EQ(d, milliseconds(500));
  ASSERT_TRUE(parse_duration("20s", &d));
  EXPECT_EQ(d, milliseconds(20'000));
  ASSERT_TRUE(parse_duration("5m", &d));
  EXPECT_EQ(d, milliseconds(300'000));
  ASSERT_TRUE(parse_duration("1h", &d));
  EXPECT_EQ(d, milliseconds(3'600'000));
  ASSERT_TRUE(parse_duration("75", &d));
  EXPECT_EQ(d, milliseconds(75'000));
  ASSERT_TRUE(parse_duration("0s", &d));
  EXPECT_EQ(d, milliseconds(0));
}

TEST(Units, DurationRejects) {
  milliseconds d{};
  for (const char* bad : {"", "s", "20 seconds", "20 s", "-5s", "1.5s", "5d", "10sec", "ms", " 5s",
                          "5S", "99999999999999999999s", "9999999999999999h"}) {
    EXPECT_FALSE(parse_duration(bad, &d)) << bad;
  }
}

TEST(Units, SizeForms) {
  uint64_t s = 0;
  ASSERT_TRUE(parse_size("16k", &s));
  EXPECT_EQ(s, 16u * 1024);
  ASSERT_TRUE(parse_size("16K", &s));
  EXPECT_EQ(s, 16u * 1024);
  ASSERT_TRUE(parse_size("1m", &s));
  EXPECT_EQ(s, 1u << 20);
  ASSERT_TRUE(parse_size("2g", &s));
  EXPECT_EQ(s, uint64_t{2} << 30);
  ASSERT_TRUE(parse_size("4096", &s));
  EXPECT_EQ(s, 4096u);
  ASSERT_TRUE(parse_size("0", &s));
  EXPECT_EQ(s, 0u);
}

TEST(Units, SizeRejects) {
  uint64_t s = 0;
  for (const char* bad :
       {"", "k", "16kb", "16 k", "1.5m", "-1", "1t", "99999999999999999999", "17179869184g"}) {
    EXPECT_FALSE(parse_size(bad, &s)) << bad;
  }
}

TEST(Units, FormatDuration) {
  EXPECT_EQ(format_duration(milliseconds(500)), "500ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(20'000)), "20s");
  EXPECT_EQ(format_duration(milliseconds(300'000)), "5m");
  EXPECT_EQ(format_duration(milliseconds(86'400'000)), "24h");
  EXPECT_EQ(format_duration(milliseconds(0)), "0s");
}

TEST(Units, FormatSize) {
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(1024), "1k");
  EXPECT_EQ(format_size(1 << 20), "1m");
  EXPECT_EQ(format_size(uint64_t{3} << 30), "3g");
  EXPECT_EQ(format_size(0), "0");
}

TEST(Units, FormatRoundTrips) {
  for (milliseconds d :
       {milliseconds(1), milliseconds(999), milliseconds(61'000), milliseconds(7'200'000)}) {
    milliseconds back{};
    ASSERT_TRUE(parse_duration(format_duration(d), &back));
    EXPECT_EQ(back, d);
  }
  for (uint64_t size : {uint64_t{1}, uint64_t{1536}, uint64_t{1} << 20, uint64_t{5} << 30}) {
    uint64_t back = 0;
    ASSERT_TRUE(parse_size(format_size(size), &back));
    EXPECT_EQ(back, size);
  }
}

}  // namespace
}  // namespace peregrine::config
