#include "http/http_date.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "support/random_inputs.h"

namespace peregrine::http {
namespace {

using peregrine::testing::for_random_inputs;

std::string fmt(time_t t) {
  char buf[kHttpDateLength];
  EXPECT_EQ(format_http_date(t, buf), kHttpDateLength);
  return std::string(buf, kHttpDateLength);
}

// Reference formatting with the C library, for comparison only.
std::string reference(time_t t) {
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

time_t utc(int y, int mon, int d, int h, int mi, int s) {
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return timegm(&tm);
}

constexpr time_t kRfcExample = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
// 2024-06-15T12:00:00Z, the "now" for two-digit-year tests.
const time_t kNow2024 = utc(2024, 6, 15, 12, 0, 0);

TEST(FormatHttpDate, RfcExample) {
  EXPECT_EQ(fmt(kRfcExample), "Sun, 06 Nov 1994 08:49:37 GMT");
}

TEST(FormatHttpDate, Epoch) {
  EXPECT_EQ(fmt(0), "Thu, 01 Jan 1970 00:00:00 GMT");
}

TEST(FormatHttpDate, NotableDates) {
  EXPECT_EQ(fmt(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(fmt(2147483647), "Tue, 19 Jan 2038 03:14:07 GMT");
  EXPECT_EQ(fmt(4102444800), "Fri, 01 Jan 2100 00:00:00 GMT");
  EXPECT_EQ(fmt(-1), "Wed, 31 Dec 1969 23:59:59 GMT");
  EXPECT_EQ(fmt(utc(1900, 3, 1, 0, 0, 0)), "Thu, 01 Mar 1900 00:00:00 GMT");
  EXPECT_EQ(fmt(utc(9999, 12, 31, 23, 59, 59)), "Fri, 31 Dec 9999 23:59:59 GMT");
}

TEST(FormatHttpDate, ClampsToFourDigitYears) {
  EXPECT_EQ(fmt(utc(9999, 12, 31, 23, 59, 59) + 1000000), "Fri, 31 Dec 9999 23:59:59 GMT");
  EXPECT_EQ(fmt(INT64_MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
  EXPECT_EQ(fmt(INT64_MIN), "Sat, 01 Jan 0000 00:00:00 GMT");
}

TEST(FormatHttpDate, MatchesLibcAcrossManyTimestamps) {
  // Every day boundary +- 1 s for 1901..2200, plus a pseudo-random walk.
  for (time_t day = utc(1901, 1, 1, 0, 0, 0); day < utc(2200, 1, 1, 0, 0, 0);
       day += 86400 * 7 + 3) {
    for (time_t t : {day - 1, day, day + 1, day + 43210}) {
      ASSERT_EQ(fmt(t), reference(t)) << t;
    }
  }
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const time_t t = static_cast<time_t>(x % 253402300800ull) - 2208988800;  // 1900..9999
    ASSERT_EQ(fmt(t), reference(t)) << t;
  }
}

TEST(ParseHttpDate, ImfFixdate) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), kRfcExample);
  EXPECT_EQ(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_EQ(parse_http_date("Wed, 31 Dec 1969 23:59:59 GMT"), -1);
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT"), 951782400);
}

TEST(ParseHttpDate, Rfc850) {
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", kNow2024), kRfcExample);
  EXPECT_EQ(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT", utc(1990, 1, 1, 0, 0, 0)), 0);
  EXPECT_EQ(parse_http_date("Tuesday, 01-Jan-70 00:00:00 GMT", kNow2024), utc(2070, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Saturday, 15-Jun-24 12:00:00 GMT", kNow2024), kNow2024);
}

TEST(ParseHttpDate, Rfc850TwoDigitYearWindow) {
  // now = 2024: years 1975..2074 are the window (now - 50, now + 50].
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-74 00:00:00 GMT", kNow2024), utc(2074, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Wednesday, 01-Jan-75 00:00:00 GMT", kNow2024),
            utc(1975, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Friday, 01-Jan-99 00:00:00 GMT", kNow2024), utc(1999, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-00 00:00:00 GMT", kNow2024),
            utc(2000, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Sunday, 01-Jan-50 00:00:00 GMT", kNow2024), utc(2050, 1, 1, 0, 0, 0));
  // now = 2090: the window is 2041..2140, so "20" is 2120 (30 years ahead), not 2020.
  const time_t now2090 = utc(2090, 1, 1, 0, 0, 0);
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-20 00:00:00 GMT", now2090), utc(2120, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-40 00:00:00 GMT", now2090), utc(2140, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-41 00:00:00 GMT", now2090), utc(2041, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-45 00:00:00 GMT", now2090), utc(2045, 1, 1, 0, 0, 0));
}

TEST(ParseHttpDate, Rfc850WithoutExplicitNowUsesTheClock) {
  // 94 is 1994 for any clock between 1945 and 2043.
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), kRfcExample);
}

TEST(ParseHttpDate, Asctime) {
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), kRfcExample);
  EXPECT_EQ(parse_http_date("Sun Nov 06 08:49:37 1994"), kRfcExample);
  EXPECT_EQ(parse_http_date("Thu Jan  1 00:00:00 1970"), 0);
  EXPECT_EQ(parse_http_date("Wed Dec 31 23:59:59 1969"), -1);
}

TEST(ParseHttpDate, SurroundingWhitespaceIsIgnored) {
  EXPECT_EQ(parse_http_date("  Sun, 06 Nov 1994 08:49:37 GMT\t"), kRfcExample);
  EXPECT_EQ(parse_http_date(" Sun Nov  6 08:49:37 1994 "), kRfcExample);
}

TEST(ParseHttpDate, WeekdayIsNotCrossChecked) {
  EXPECT_EQ(parse_http_date("Mon, 06 Nov 1994 08:49:37 GMT"), kRfcExample);
}

TEST(ParseHttpDate, LeapSecondCountsLikeTimegm) {
  EXPECT_EQ(parse_http_date("Sat, 31 Dec 2016 23:59:60 GMT"), utc(2017, 1, 1, 0, 0, 0));
}

TEST(ParseHttpDate, RejectsMalformed) {
  const char* bad[] = {
      "",
      "garbage",
      "Sun, 06 Nov 1994 08:49:37 UTC",
      "Sun, 06 Nov 1994 08:49:37 gmt",
      "Sun, 06 Nov 1994 08:49:37",
      "Sun, 06 Nov 1994 08:49:37 GMT+1",
      "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 94 08:49:37 GMT",
      "Sun,06 Nov 1994 08:49:37 GMT ",
      "Sun, 06-Nov-1994 08:49:37 GMT",
      "sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 nov 1994 08:49:37 GMT",
      "Xyz, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nvv 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 08.49.37 GMT",
      "Sun, 06 Nov 1994 8:49:37 GMT ",
      "Sun, 06 Nov 19a4 08:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 GMT; length=12",
      "Sunday, 06-Nov-94 08:49:37 UTC",
      "Sundae, 06-Nov-94 08:49:37 GMT",
      "Sun, 06-Nov-94 08:49:37 GMT",
      "Sunday, 06 Nov 94 08:49:37 GMT",
      "Sunday, 06-Nov-1994 08:49:37 GMT",
      "Sun Nov  6 08:49:37 94",
      "Sun Nov 6 08:49:37 1994",
      "Sun Nov  6 08:49:37 1994 GMT",
      "Sun Nov x6 08:49:37 1994",
      "1994-11-06T08:49:37Z",
      "784111777",
  };
  for (const char* s : bad) EXPECT_EQ(parse_http_date(s, kNow2024), std::nullopt) << s;
}

TEST(ParseHttpDate, RejectsOutOfRangeFields) {
  const char* bad[] = {
      "Sun, 00 Nov 1994 08:49:37 GMT",  "Sun, 31 Nov 1994 08:49:37 GMT",
      "Sun, 32 Jan 1994 08:49:37 GMT",  "Sun, 29 Feb 1900 00:00:00 GMT",
      "Sun, 29 Feb 2023 00:00:00 GMT",  "Sun, 06 Nov 1994 24:00:00 GMT",
      "Sun, 06 Nov 1994 08:60:00 GMT",  "Sun, 06 Nov 1994 08:49:61 GMT",
      "Sun Nov  0 08:49:37 1994",       "Sun Feb 30 08:49:37 1994",
      "Sunday, 31-Apr-94 08:49:37 GMT",
  };
  for (const char* s : bad) EXPECT_EQ(parse_http_date(s, kNow2024), std::nullopt) << s;
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT"), 951782400);
  EXPECT_TRUE(parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT").has_value());
}

TEST(ParseHttpDate, RoundTripsAllFormsAcrossManyTimestamps) {
  uint64_t x = 0x243F6A8885A308D3ull;
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const time_t t = static_cast<time_t>(x % 253402300800ull) - 62167219200;  // 0000..9999
    const std::string imf = fmt(t);
    ASSERT_EQ(parse_http_date(imf), t) << imf;
  }
  for (time_t t = utc(1975, 1, 1, 0, 0, 0); t < utc(2074, 1, 1, 0, 0, 0); t += 86400 * 5 + 777) {
    struct tm tm {};
    gmtime_r(&t, &tm);
    char buf[64];
    size_t n = strftime(buf, sizeof(buf), "%A, %d-%b-%y %H:%M:%S GMT", &tm);
    ASSERT_EQ(parse_http_date(std::string_view(buf, n), kNow2024), t) << buf;
    n = strftime(buf, sizeof(buf), "%a %b %e %H:%M:%S %Y", &tm);
    ASSERT_EQ(parse_http_date(std::string_view(buf, n)), t) << buf;
  }
}

TEST(ParseHttpDate, RandomInputsAreSafe) {
  for_random_inputs("SunModay, 0123456789:-GMT NovJa", 32, 100000, [](std::string_view s) {
    const std::optional<time_t> t = parse_http_date(s, kNow2024);
    if (t) {
      // Anything accepted must be a real date that formats back to a 29-byte IMF-fixdate.
      ASSERT_EQ(fmt(*t).size(), kHttpDateLength);
    }
  });
}

}  // namespace
}  // namespace peregrine::http
