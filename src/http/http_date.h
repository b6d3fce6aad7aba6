// HTTP dates (RFC 9110 5.6.7). Pure and thread-safe: the calendar arithmetic is done here, with
// no gmtime/timegm, no time zone and no locale.
#pragma once

#include <cstddef>
#include <ctime>
#include <optional>
#include <string_view>

namespace peregrine::http {

inline constexpr size_t kHttpDateLength = 29;

// Writes the IMF-fixdate form, e.g. "Sun, 06 Nov 1994 08:49:37 GMT": exactly 29 bytes, no NUL.
// Returns 29. Times outside years 0000..9999 are clamped to that range (the format has a
// four-digit year); times before 1970 are formatted correctly.
size_t format_http_date(time_t t, char out[kHttpDateLength]);

// Parses the three forms a recipient must accept:
//   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
//   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"
//   asctime      "Sun Nov  6 08:49:37 1994"   (the day may also be two digits: "Nov 06")
// Names are case-sensitive as in the RFC grammar; the day name must be a valid name but is not
// checked against the date (as nginx and most servers do). Fields are range-checked (day within
// its month, leap years, hour <= 23, minute <= 59, second <= 60 where 60 is a leap second counted
// like timegm does). Leading and trailing spaces/tabs are ignored; anything else -> nullopt.
//
// RFC 850's two-digit year is read per RFC 9110: the year with those last two digits in the
// window (now - 50 years, now + 50 years]. The one-argument overload reads the clock (only when
// it meets that form); pass `now` to make the result deterministic.
std::optional<time_t> parse_http_date(std::string_view s);
std::optional<time_t> parse_http_date(std::string_view s, time_t now);

}  // namespace peregrine::http
