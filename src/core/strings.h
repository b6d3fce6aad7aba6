// Small ASCII string helpers shared by the parsers, the router and the loggers. HTTP's grammar is
// ASCII, so none of these look at the locale.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace peregrine {

constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c | 0x20) : c;
}

// RFC 9110 5.6.3: optional whitespace is spaces and horizontal tabs.
constexpr bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// Case-insensitive comparison of ASCII text (header names, host names, tokens).
constexpr bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// RFC 9110 5.6.2: tchar, the characters of a token (method, header name, coding). A table:
// parsers test every byte of every header name with it.
namespace detail {
inline constexpr auto kTchar = [] {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[static_cast<size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[static_cast<size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[static_cast<size_t>(c)] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();
}  // namespace detail

constexpr bool is_tchar(unsigned char c) {
  return detail::kTchar[c];
}

// Case-insensitive comparison of a token (a header name, a list element) against a lowercase
// literal, 8 or 4 bytes at a time with overlapping loads; N is a constant, so this unrolls.
// Exact for tokens: OR-ing 0x20 maps only 'A'-'Z' onto letters and leaves '-' and digits
// unchanged. It is also exact for field values, where the bytes it could confuse with '-' or a
// digit, CR and other control characters, cannot occur. Header names and tokens are compared on
// every header of every request and every proxied or FastCGI response: ascii_iequals, a byte at a
// time, cost ~5 instructions a byte there.
template <size_t N>
inline bool token_is(std::string_view token, const char (&lower)[N]) {
  constexpr size_t n = N - 1;
  const char* s = token.data();
  if (token.size() != n) return false;
  if constexpr (n >= 8) {
    uint64_t diff = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uint64_t a, b;
      std::memcpy(&a, s + i, 8);
      std::memcpy(&b, lower + i, 8);
      diff |= (a | 0x2020202020202020ULL) ^ b;
    }
    if constexpr (n % 8 != 0) {
      uint64_t a, b;
      std::memcpy(&a, s + n - 8, 8);
      std::memcpy(&b, lower + n - 8, 8);
      diff |= (a | 0x2020202020202020ULL) ^ b;
    }
    return diff == 0;
  } else if constexpr (n >= 4) {
    uint32_t a1, b1, a2, b2;
    std::memcpy(&a1, s, 4);
    std::memcpy(&b1, lower, 4);
    std::memcpy(&a2, s + n - 4, 4);
    std::memcpy(&b2, lower + n - 4, 4);
    return (((a1 | 0x20202020U) ^ b1) | ((a2 | 0x20202020U) ^ b2)) == 0;
  } else {
    for (size_t i = 0; i < n; ++i) {
      if ((static_cast<unsigned char>(s[i]) | 0x20) != static_cast<unsigned char>(lower[i])) {
        return false;
      }
    }
    return true;
  }
}

// Appends `text` with the characters that are markup in HTML and XML replaced by entities, so it
// can stand in element content and in quoted attribute values.
inline void append_html_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

// Appends the decimal digits of `value`, without snprintf (this runs for every response).
inline void append_decimal(std::string& out, unsigned long long value) {
  char digits[24];
  char* p = digits + sizeof digits;
  do {
    *--p = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value);
  out.append(p, static_cast<size_t>(digits + sizeof digits - p));
}

// Appends `text` as a JSON string, quotes included. Bytes outside printable ASCII become \u00XX
// (one code point per byte), so the output is valid JSON whatever bytes a client sent.
inline void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

}  // namespace peregrine
