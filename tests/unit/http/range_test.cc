#include "http/range.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/random_inputs.h"

namespace peregrine::http {
namespace {

using peregrine::testing::for_random_inputs;

using Pieces = std::vector<std::pair<uint64_t, uint64_t>>;

Pieces pieces(const RangeSet& s) {
  Pieces p;
  for (size_t i = 0; i < s.count; ++i) p.emplace_back(s.ranges[i].first, s.ranges[i].last);
  return p;
}

// Expects kSatisfiable with exactly these pieces.
void expect_ranges(std::string_view header, uint64_t size, const Pieces& want) {
  const RangeSet s = parse_range(header, size);
  EXPECT_EQ(s.status, RangeStatus::kSatisfiable) << header;
  EXPECT_EQ(pieces(s), want) << header;
}

void expect_status(std::string_view header, uint64_t size, RangeStatus want) {
  const RangeSet s = parse_range(header, size);
  EXPECT_EQ(s.status, want) << header;
  if (want != RangeStatus::kSatisfiable) {
    EXPECT_EQ(s.count, 0u) << header;
  }
}

TEST(ParseRange, SimpleForms) {
  expect_ranges("bytes=0-99", 1234, {{0, 99}});
  expect_ranges("bytes=-500", 10000, {{9500, 9999}});
  expect_ranges("bytes=9500-", 10000, {{9500, 9999}});
  expect_ranges("bytes=0-0", 1, {{0, 0}});
  expect_ranges("bytes=0-", 1, {{0, 0}});
  expect_ranges("bytes=-1", 1, {{0, 0}});
}

TEST(ParseRange, LastIsClampedToTheEnd) {
  expect_ranges("bytes=0-99999", 100, {{0, 99}});
  expect_ranges("bytes=50-100", 100, {{50, 99}});
  expect_ranges("bytes=99-99", 100, {{99, 99}});
}

TEST(ParseRange, SuffixLongerThanFileIsWholeFile) {
  expect_ranges("bytes=-5000", 100, {{0, 99}});
  expect_ranges("bytes=-100", 100, {{0, 99}});
  expect_ranges("bytes=-99", 100, {{1, 99}});
}

TEST(ParseRange, HugeNumbersSaturate) {
  expect_ranges("bytes=0-99999999999999999999999999", 100, {{0, 99}});
  expect_ranges("bytes=-99999999999999999999999999", 100, {{0, 99}});
  expect_status("bytes=99999999999999999999999999-", 100, RangeStatus::kUnsatisfiable);
  expect_ranges("bytes=0-18446744073709551615", 18446744073709551615ull,
                {{0, 18446744073709551614ull}});
}

TEST(ParseRange, UnitIsCaseInsensitive) {
  expect_ranges("Bytes=0-1", 10, {{0, 1}});
  expect_ranges("BYTES=0-1", 10, {{0, 1}});
}

TEST(ParseRange, OtherUnitsAreIgnored) {
  expect_status("items=0-1", 10, RangeStatus::kNone);
  expect_status("byte=0-1", 10, RangeStatus::kNone);
  expect_status("bytesx=0-1", 10, RangeStatus::kNone);
  expect_status("=0-1", 10, RangeStatus::kNone);
  expect_status("bytes 0-1", 10, RangeStatus::kNone);
  expect_status("bytes =0-1", 10, RangeStatus::kNone);
}

TEST(ParseRange, WhitespaceIsTolerated) {
  expect_ranges("  bytes=0-1  ", 10, {{0, 1}});
  expect_ranges("bytes= 0-1", 10, {{0, 1}});
  expect_ranges("bytes=0-1 , 5-6", 10, {{0, 1}, {5, 6}});
  expect_ranges("bytes=0-1,\t5-6", 10, {{0, 1}, {5, 6}});
  expect_ranges("bytes=0-1,5-6 ", 10, {{0, 1}, {5, 6}});
}

TEST(ParseRange, EmptyListElementsAreSkipped) {
  expect_ranges("bytes=0-1,,5-6", 10, {{0, 1}, {5, 6}});
  expect_ranges("bytes=,0-1", 10, {{0, 1}});
  expect_ranges("bytes=0-1,", 10, {{0, 1}});
  expect_ranges("bytes= , 0-1 , ", 10, {{0, 1}});
}

TEST(ParseRange, SyntaxErrorsIgnoreTheHeader) {
  const char* bad[] = {
      "",           "bytes",      "bytes=",        "bytes=,",       "bytes= , ",   "bytes=-",
      "bytes=a-b",  "bytes=1",    "bytes=1-2-3",   "bytes=--1",     "bytes=1--2",  "bytes=+1-2",
      "bytes=1 -2", "bytes=1- 2", "bytes=0x1-2",   "bytes=1-2;3-4", "bytes=0-1,x", "bytes=0-1 5-6",
      "bytes=-1-2", "bytes=5-4",  "bytes=0-1,5-4", "bytes=1.5-2",
  };
  for (const char* h : bad) expect_status(h, 100, RangeStatus::kNone);
}

TEST(ParseRange, RangesBeyondTheEndAreDropped) {
  expect_ranges("bytes=0-9,200-300", 100, {{0, 9}});
  expect_ranges("bytes=100-200,0-0", 100, {{0, 0}});
  expect_status("bytes=100-200", 100, RangeStatus::kUnsatisfiable);
  expect_status("bytes=100-", 100, RangeStatus::kUnsatisfiable);
  expect_status("bytes=100-,200-300", 100, RangeStatus::kUnsatisfiable);
}

TEST(ParseRange, ZeroSuffixIsUnsatisfiable) {
  expect_status("bytes=-0", 100, RangeStatus::kUnsatisfiable);
  expect_ranges("bytes=-0,0-0", 100, {{0, 0}});
}

TEST(ParseRange, ZeroLengthFileIsUnsatisfiable) {
  expect_status("bytes=0-", 0, RangeStatus::kUnsatisfiable);
  expect_status("bytes=0-0", 0, RangeStatus::kUnsatisfiable);
  expect_status("bytes=-1", 0, RangeStatus::kUnsatisfiable);
  expect_status("bytes=-0", 0, RangeStatus::kUnsatisfiable);
  // Syntax still wins: an invalid header on an empty file is ignored, not a 416.
  expect_status("bytes=x", 0, RangeStatus::kNone);
}

TEST(ParseRange, MultipleDisjointRangesAreSorted) {
  expect_ranges("bytes=0-1,5-6,9-9", 10, {{0, 1}, {5, 6}, {9, 9}});
  expect_ranges("bytes=9-9,0-1,5-6", 10, {{0, 1}, {5, 6}, {9, 9}});
  expect_ranges("bytes=500-600,601-999", 10000, {{500, 999}});
  expect_ranges("bytes=-100,0-10", 1000, {{0, 10}, {900, 999}});
}

TEST(ParseRange, OverlappingAndAdjacentRangesCoalesce) {
  expect_ranges("bytes=0-10,5-20", 100, {{0, 20}});
  expect_ranges("bytes=0-10,11-20", 100, {{0, 20}});
  expect_ranges("bytes=0-10,12-20", 100, {{0, 10}, {12, 20}});
  expect_ranges("bytes=5-20,0-10", 100, {{0, 20}});
  expect_ranges("bytes=0-0,0-0,0-0,0-0", 100, {{0, 0}});
  expect_ranges("bytes=0-,-50", 100, {{0, 99}});
  expect_ranges("bytes=10-20,30-40,50-60,15-55", 100, {{10, 60}});
  expect_ranges("bytes=10-20,30-40,50-60,0-99", 100, {{0, 99}});
  expect_ranges("bytes=10-20,30-40,21-29", 100, {{10, 40}});
  expect_ranges("bytes=50-60,10-20,30-40,41-49", 100, {{10, 20}, {30, 60}});
}

TEST(ParseRange, AmplificationIsCollapsed) {
  std::string h = "bytes=";
  for (int i = 0; i < 1000; ++i) h += "0-1000,";
  expect_ranges(h, 100000, {{0, 1000}});
}

TEST(ParseRange, SixteenDisjointRangesAreAllowed) {
  std::string h = "bytes=";
  Pieces want;
  for (uint64_t i = 0; i < kMaxRanges; ++i) {
    h += std::to_string(i * 10) + "-" + std::to_string(i * 10 + 1) + ",";
    want.emplace_back(i * 10, i * 10 + 1);
  }
  expect_ranges(h, 1000, want);
}

TEST(ParseRange, MoreThanSixteenDisjointRangesAreIgnored) {
  std::string h = "bytes=";
  for (uint64_t i = 0; i <= kMaxRanges; ++i) {
    h += std::to_string(i * 10) + "-" + std::to_string(i * 10 + 1) + ",";
  }
  expect_status(h, 1000, RangeStatus::kNone);
}

TEST(ParseRange, ManyRangesThatMergeAsTheyArriveAreFine) {
  std::string h = "bytes=";
  for (uint64_t i = 0; i < 100; ++i) {
    h += std::to_string(i * 10) + "-" + std::to_string(i * 10 + 9) + ",";
  }
  expect_ranges(h, 100000, {{0, 999}});
}

TEST(ParseRange, SyntaxErrorAfterTooManyIsStillNone) {
  std::string h = "bytes=";
  for (uint64_t i = 0; i < 40; ++i)
    h += std::to_string(i * 10) + "-" + std::to_string(i * 10) + ",";
  h += "junk";
  expect_status(h, 1000, RangeStatus::kNone);
}

TEST(FormatContentRange, Formats) {
  char buf[kContentRangeMaxLength];
  size_t n = format_content_range({0, 99}, 1234, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "bytes 0-99/1234");
  n = format_content_range({18446744073709551613ull, 18446744073709551614ull},
                           18446744073709551615ull, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n),
            "bytes 18446744073709551613-18446744073709551614/18446744073709551615");
  EXPECT_EQ(n, kContentRangeMaxLength);
}

TEST(FormatContentRange, TooSmallBufferWritesNothing) {
  char buf[8] = "xxxxxxx";
  EXPECT_EQ(format_content_range({0, 99}, 1234, buf, sizeof(buf)), 0u);
  EXPECT_EQ(std::string_view(buf), "xxxxxxx");
  char exact[15];
  EXPECT_EQ(format_content_range({0, 99}, 1234, exact, sizeof(exact)), 15u);
}

TEST(FormatUnsatisfiedRange, Formats) {
  char buf[kContentRangeMaxLength];
  size_t n = format_unsatisfied_range(1234, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "bytes */1234");
  n = format_unsatisfied_range(0, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "bytes */0");
  EXPECT_EQ(format_unsatisfied_range(1234, buf, 11), 0u);
  EXPECT_EQ(format_unsatisfied_range(1234, buf, 12), 12u);
}

TEST(ParseRange, ParsedRangesFormatAsContentRange) {
  const RangeSet s = parse_range("bytes=-500", 10000);
  ASSERT_EQ(s.status, RangeStatus::kSatisfiable);
  char buf[kContentRangeMaxLength];
  const size_t n = format_content_range(s.ranges[0], 10000, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "bytes 9500-9999/10000");
}

TEST(ParseRange, RandomInputsAreSafeAndConsistent) {
  for_random_inputs("bytes=0123456789-, \t,-", 40, 100000, [](std::string_view h) {
    std::string header = "bytes=";
    header += h;
    for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{50}, uint64_t{1000}}) {
      const RangeSet s = parse_range(header, size);
      if (s.status != RangeStatus::kSatisfiable) {
        ASSERT_EQ(s.count, 0u);
        continue;
      }
      ASSERT_GE(s.count, 1u);
      ASSERT_LE(s.count, kMaxRanges);
      for (size_t i = 0; i < s.count; ++i) {
        ASSERT_LE(s.ranges[i].first, s.ranges[i].last) << header;
        ASSERT_LT(s.ranges[i].last, size) << header;
        if (i > 0) {
          ASSERT_GT(s.ranges[i].first, s.ranges[i - 1].last + 1) << header;
        }
      }
    }
  });
  for_random_inputs("bytes=0123456789-, ", 30, 20000,
                    [](std::string_view h) { (void)parse_range(h, 100); });
}

}  // namespace
}  // namespace peregrine::http
