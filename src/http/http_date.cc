#include "http/http_date.h"

#include <cstdint>

namespace peregrine::http {
namespace {

constexpr int64_t kSecondsPerDay = 86400;

// Days since 1970-01-01 of a proleptic Gregorian date; month 1..12. Valid for any year that fits.
// Eras of 400 years (146097 days) make the arithmetic exact without tables; the year is shifted
// to start in March so the leap day falls at the end.
constexpr int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);   // [0, 399]
  const unsigned mp = m > 2 ? m - 3 : m + 9;                   // March = 0
  const unsigned doy = (153 * mp + 2) / 5 + d - 1;             // [0, 365]
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;  // [0, 146096]
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

struct Civil {
  int64_t year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
};

// Inverse of days_from_civil.
constexpr Civil civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);                // [0, 146096]
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const unsigned mp = (5 * doy + 2) / 153;                                     // [0, 11]
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
  return {y, m, d};
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(civil_from_days(11016).day == 29);  // 2000-02-29

constexpr bool is_leap(int64_t y) {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

constexpr unsigned days_in_month(int64_t y, unsigned m) {
  constexpr unsigned kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

constexpr const char kDayNames[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::string_view kLongDayNames[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                               "Thursday", "Friday", "Saturday"};
constexpr const char kMonthNames[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
constexpr int64_t kMinTime = days_from_civil(0, 1, 1) * kSecondsPerDay;
constexpr int64_t kMaxTime = days_from_civil(9999, 12, 31) * kSecondsPerDay + kSecondsPerDay - 1;

inline void put2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// Floor division/modulo for negative times.
constexpr int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0 && a < 0) ? 1 : 0);
}

// ---- parsing helpers ----

// Two ASCII digits at p -> value, or -1.
inline int digits2(const char* p) {
  const unsigned a = static_cast<unsigned char>(p[0]) - '0';
  const unsigned b = static_cast<unsigned char>(p[1]) - '0';
  if (a > 9 || b > 9) return -1;
  return static_cast<int>(a * 10 + b);
}

inline int digits4(const char* p) {
  const int hi = digits2(p);
  const int lo = digits2(p + 2);
  if (hi < 0 || lo < 0) return -1;
  return hi * 100 + lo;
}

// Month number 1..12 for a three-letter name at p, or 0.
inline unsigned month_from_name(const char* p) {
  const std::string_view name(p, 3);
  for (unsigned i = 0; i < 12; ++i) {
    if (name == std::string_view(kMonthNames[i], 3)) return i + 1;
  }
  return 0;
}

inline bool is_short_day_name(const char* p) {
  const std::string_view name(p, 3);
  for (const auto& d : kDayNames) {
    if (name == std::string_view(d, 3)) return true;
  }
  return false;
}

// "HH:MM:SS" at p into seconds of the day (a leap second 60 counts as the next second, like
// timegm), or -1.
inline int64_t time_of_day(const char* p) {
  if (p[2] != ':' || p[5] != ':') return -1;
  const int h = digits2(p);
  const int m = digits2(p + 3);
  const int s = digits2(p + 6);
  if (h < 0 || h > 23 || m < 0 || m > 59 || s < 0 || s > 60) return -1;
  return h * 3600 + m * 60 + s;
}

inline std::optional<time_t> make_time(int64_t year, unsigned month, int day, int64_t tod) {
  if (month == 0 || day < 1 || static_cast<unsigned>(day) > days_in_month(year, month) || tod < 0) {
    return std::nullopt;
  }
  return static_cast<time_t>(
      days_from_civil(year, month, static_cast<unsigned>(day)) * kSecondsPerDay + tod);
}

// "Sun, 06 Nov 1994 08:49:37 GMT"
std::optional<time_t> parse_imf_fixdate(std::string_view s) {
  if (s.size() != 29) return std::nullopt;
  const char* p = s.data();
  if (!is_short_day_name(p) || p[3] != ',' || p[4] != ' ' || p[7] != ' ' || p[11] != ' ' ||
      p[16] != ' ' || s.substr(25) != " GMT") {
    return std::nullopt;
  }
  const int day = digits2(p + 5);
  const unsigned month = month_from_name(p + 8);
  const int year = digits4(p + 12);
  if (year < 0) return std::nullopt;
  return make_time(year, month, day, time_of_day(p + 17));
}

// "Sunday, 06-Nov-94 08:49:37 GMT"
std::optional<time_t> parse_rfc850(std::string_view s, time_t now) {
  const size_t comma = s.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const std::string_view day_name = s.substr(0, comma);
  bool name_ok = false;
  for (const auto& d : kLongDayNames) name_ok |= day_name == d;
  if (!name_ok) return std::nullopt;
  const std::string_view rest = s.substr(comma);
  // ", 06-Nov-94 08:49:37 GMT" is 24 bytes.
  if (rest.size() != 24) return std::nullopt;
  const char* p = rest.data();
  if (p[1] != ' ' || p[4] != '-' || p[8] != '-' || p[11] != ' ' || rest.substr(20) != " GMT") {
    return std::nullopt;
  }
  const int day = digits2(p + 2);
  const unsigned month = month_from_name(p + 5);
  const int yy = digits2(p + 9);
  if (yy < 0) return std::nullopt;
  // RFC 9110: a two-digit year that appears to be more than 50 years in the future means the most
  // recent past year with the same last two digits. Window: (now - 50, now + 50].
  const int64_t now_year = civil_from_days(floor_div(now, kSecondsPerDay)).year;
  int64_t year = now_year - (((now_year % 100) + 100) % 100) + yy;
  if (year > now_year + 50) {
    year -= 100;
  } else if (year <= now_year - 50) {
    year += 100;
  }
  return make_time(year, month, day, time_of_day(p + 12));
}

// "Sun Nov  6 08:49:37 1994"
std::optional<time_t> parse_asctime(std::string_view s) {
  if (s.size() != 24) return std::nullopt;
  const char* p = s.data();
  if (!is_short_day_name(p) || p[3] != ' ' || p[7] != ' ' || p[10] != ' ' || p[19] != ' ') {
    return std::nullopt;
  }
  const unsigned month = month_from_name(p + 4);
  int day;
  if (p[8] == ' ') {
    const unsigned d = static_cast<unsigned char>(p[9]) - '0';
    if (d > 9) return std::nullopt;
    day = static_cast<int>(d);
  } else {
    day = digits2(p + 8);
  }
  const int year = digits4(p + 20);
  if (year < 0) return std::nullopt;
  return make_time(year, month, day, time_of_day(p + 11));
}

constexpr bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

}  // namespace

size_t format_http_date(time_t t, char out[kHttpDateLength]) {
  int64_t v = static_cast<int64_t>(t);
  if (v < kMinTime) v = kMinTime;
  if (v > kMaxTime) v = kMaxTime;
  const int64_t days = floor_div(v, kSecondsPerDay);
  const auto secs = static_cast<unsigned>(v - days * kSecondsPerDay);
  const Civil c = civil_from_days(days);
  const auto weekday = static_cast<unsigned>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  const auto year = static_cast<unsigned>(c.year);

  const char* dn = kDayNames[weekday];
  const char* mn = kMonthNames[c.month - 1];
  out[0] = dn[0];
  out[1] = dn[1];
  out[2] = dn[2];
  out[3] = ',';
  out[4] = ' ';
  put2(out + 5, c.day);
  out[7] = ' ';
  out[8] = mn[0];
  out[9] = mn[1];
  out[10] = mn[2];
  out[11] = ' ';
  put2(out + 12, year / 100);
  put2(out + 14, year % 100);
  out[16] = ' ';
  put2(out + 17, secs / 3600);
  out[19] = ':';
  put2(out + 20, secs / 60 % 60);
  out[22] = ':';
  put2(out + 23, secs % 60);
  out[25] = ' ';
  out[26] = 'G';
  out[27] = 'M';
  out[28] = 'T';
  return kHttpDateLength;
}

std::optional<time_t> parse_http_date(std::string_view s, time_t now) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  if (s.size() < 4) return std::nullopt;
  if (s[3] == ',') return parse_imf_fixdate(s);
  if (s[3] == ' ') return parse_asctime(s);
  return parse_rfc850(s, now);
}

std::optional<time_t> parse_http_date(std::string_view s) {
  // Only the RFC 850 form needs the clock; read it only then.
  std::string_view trimmed = s;
  while (!trimmed.empty() && is_ows(trimmed.front())) trimmed.remove_prefix(1);
  if (trimmed.size() >= 4 && (trimmed[3] == ',' || trimmed[3] == ' ')) {
    return parse_http_date(s, 0);
  }
  return parse_http_date(s, std::time(nullptr));
}

}  // namespace peregrine::http
