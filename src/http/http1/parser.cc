// HTTP/1.1 request-head parser and chunked decoder (RFC 9112, RFC 9110), strict mode.
//
// The parser works in two steps:
//   1. scan: find the end of the head (CRLF CRLF), resuming where the previous call stopped.
//      The scan looks for LF (16 bytes at a time) and checks the bytes before each LF, so it
//      needs no overlap with the previous call (the "3 bytes of overlap" of a forward CRLFCRLF
//      search are the 3 bytes it looks back at). It rejects a bare LF the moment it sees one and
//      enforces the size limits, so kNeedMore is never returned for a buffer already over a limit.
//   2. parse: only once the head is complete, walk it once and fill the Request.
// Each verdict depends only on the bytes up to the point where it is decided, so feeding a
// request in pieces gives the same verdict as feeding it whole (the fuzz target checks this).
//
// Rejected forms and their status:
//   400  bare LF or bare CR anywhere in the head; a method that is not a token; anything but
//        exactly one SP around the request-target; a malformed HTTP-version ("http/1.1",
//        "HTTP/1.1 ", "HTTP/11.1"); a target byte outside 0x21-0x7E; a fragment ('#'); a target
//        form that does not fit the method (asterisk-form only with OPTIONS, authority-form
//        only and always with CONNECT); an absolute-form with a scheme other than http(s), with
//        userinfo or an empty host; obs-fold; whitespace before ':'; a field-name that is not a
//        token; a CTL other than HTAB in a field-value; a missing (HTTP/1.1) or repeated Host or
//        one that is not uri-host[:port]; a Content-Length that is not 1*DIGIT, exceeds 2^62 or
//        disagrees with another; Transfer-Encoding in HTTP/1.0, together with Content-Length,
//        with chunked applied twice or not last, or empty; a malformed Connection list.
//   414  request-target longer than max_target_bytes (or a request line that runs past
//        max_target_bytes plus a small allowance without ending).
//   417  an Expect other than 100-continue.
//   431  more than kMaxHeaders fields, or a head longer than max_head_bytes.
//   501  a transfer coding other than chunked. (A method token we do not know is not an error
//        here: the parser returns kDone with Method::kUnknown and the route decides.)
//   505  a well-formed HTTP-version whose major is not 1 ("HTTP/2.0", "HTTP/0.9"); a higher
//        minor of 1 ("HTTP/1.2") is processed as 1.1 (RFC 9110 2.5).
// The parser does not percent-decode or normalize the path.
#include "http/http1/parser.h"

#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/strings.h"
#include "http/http1/word_scan.h"

namespace peregrine::http1 {
namespace {

// ---- Character classes, one table lookup each ----
enum : uint8_t {
  kTchar = 1 << 0,      // token character (RFC 9110 5.6.2)
  kPathChar = 1 << 1,   // visible ASCII, except '?' and '#'
  kQueryChar = 1 << 2,  // visible ASCII, except '#'
  kValueChar = 1 << 3,  // VCHAR, obs-text or SP (HTAB is handled apart)
  kHostChar = 1 << 4,   // reg-name: unreserved and sub-delims ('%' is handled apart)
  kHexChar = 1 << 5,
};

constexpr bool IsAlpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool IsDigit(int c) {
  return c >= '0' && c <= '9';
}

struct CharTable {
  uint8_t v[256];
};

constexpr CharTable MakeCharTable() {
  CharTable t{};
  for (int c = 0; c < 256; ++c) {
    uint8_t f = 0;
    bool alnum = IsAlpha(c) || IsDigit(c);
    bool tchar_punct = false;
    for (char p : std::string_view("!#$%&'*+-.^_`|~")) tchar_punct |= (c == p);
    if (alnum || tchar_punct) f |= kTchar;
    if (c >= 0x21 && c <= 0x7e) {
      f |= kQueryChar;
      if (c != '?') f |= kPathChar;
      if (c == '#') f &= static_cast<uint8_t>(~(kPathChar | kQueryChar));
    }
    if ((c >= 0x20 && c <= 0x7e) || c >= 0x80) f |= kValueChar;
    bool host_punct = false;
    for (char p : std::string_view("-._~!$&'()*+,;=")) host_punct |= (c == p);
    if (alnum || host_punct) f |= kHostChar;
    if (IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) f |= kHexChar;
    t.v[c] = f;
  }
  return t;
}

constexpr CharTable kChars = MakeCharTable();

inline bool Is(char c, uint8_t cls) {
  return (kChars.v[static_cast<unsigned char>(c)] & cls) != 0;
}
inline bool IsOws(char c) {
  return c == ' ' || c == '\t';
}

inline int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Anything beyond the target on a request line: method, two SPs, "HTTP/1.1", CRLF. A line that
// runs longer than max_target_bytes + this without ending is answered 414 before it completes.
constexpr size_t kRequestLineSlack = 64;

// The largest Content-Length or chunk size we accept (and the largest value that cannot overflow
// an int64 when bytes are added to it).
constexpr uint64_t kMaxBodyLength = uint64_t{1} << 62;

ParseResult Fail(int status, const char* reason) {
  ParseResult r;
  r.status = ParseStatus::kError;
  r.error_status = status;
  r.error_reason = reason;
  return r;
}

using namespace word_scan;  // NOLINT: the helpers are this file's vocabulary

// Offset of the first LF in [from, to), or `to` if there is none.
inline size_t FindLf(const char* buf, size_t from, size_t to) {
#if defined(__SSE2__)
  const __m128i lf = _mm_set1_epi8('\n');
  while (to - from >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + from));
    const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, lf)));
    if (m != 0) return from + static_cast<size_t>(std::countr_zero(m));
    from += 16;
  }
  if (from < to && to >= 16) {
    // Fewer than 16 bytes left: one load that ends at `to`, ignoring the bytes before `from`.
    const size_t base = to - 16;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + base));
    unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, lf)));
    m >>= (from - base);
    return m != 0 ? from + static_cast<size_t>(std::countr_zero(m)) : to;
  }
  while (from < to && buf[from] != '\n') ++from;
  return from;
#else
  const void* p = from < to ? std::memchr(buf + from, '\n', to - from) : nullptr;
  return p ? static_cast<size_t>(static_cast<const char*>(p) - buf) : to;
#endif
}

// Skips request-target bytes (visible ASCII), stopping at the first other byte, or at '#', or
// also at '?' when `stop_at_question`. The request line ends in CRLF, so this stops before `end`.
template <bool stop_at_question>
inline const char* ScanTarget(const char* p, const char* end) {
  if constexpr (kLittleEndian) {
    while (end - p >= 8) {
      const uint64_t x = Load8(p);
      uint64_t m = BytesBelow(x, 0x21) | BytesAtLeast7F(x) | BytesEqual(x, '#');
      if (stop_at_question) m |= BytesEqual(x, '?');
      if (m != 0) return p + FirstByte(m);
      p += 8;
    }
  }
  while (Is(*p, stop_at_question ? kPathChar : kQueryChar)) ++p;
  return p;
}

// uri-host [ ":" port ] (RFC 3986 3.2.2-3.2.3). uri-host is an IP-literal ("[" IPv6 "]") or a
// reg-name/IPv4 address; userinfo, '/', spaces and other delimiters are rejected. The port is at
// most 5 digits and 65535; it may be empty unless `require_port`. The byte at `e` must exist and
// be neither a reg-name character nor '%' (callers pass a range followed by OWS, CR, '/', '?' or
// SP), so the reg-name loop needs no bounds check.
bool ValidHostPort(const char* p, const char* e, bool require_port) {
  if (p == e) return false;
  if (*p == '[') {
    const char* s = ++p;
    while (p < e && (Is(*p, kHexChar) || *p == ':' || *p == '.')) ++p;
    if (p == s || p == e || *p != ']') return false;
    ++p;
  } else {
    const char* s = p;
    for (;;) {
      while (Is(*p, kHostChar)) ++p;
      if (*p != '%') break;
      if (e - p < 3 || !Is(p[1], kHexChar) || !Is(p[2], kHexChar)) return false;
      p += 3;
    }
    if (p == s || p > e) return false;
  }
  if (p == e) return !require_port;
  if (*p != ':') return false;
  ++p;
  if (e - p > 5) return false;
  if (p == e) return !require_port;
  uint32_t port = 0;
  for (; p < e; ++p) {
    if (!IsDigit(*p)) return false;
    port = port * 10 + static_cast<uint32_t>(*p - '0');
  }
  return port <= 65535;
}

// Content-Length = 1*DIGIT; a list of identical values ("5, 5") is accepted (RFC 9110 8.6).
// Returns -1 when malformed, over 2^62 or when the elements differ.
int64_t ParseContentLength(const char* p, const char* e) {
  int64_t result = -1;
  for (;;) {
    const char* s = p;
    uint64_t v = 0;
    while (p < e && IsDigit(*p)) {
      uint64_t d = static_cast<uint64_t>(*p - '0');
      if (v > (kMaxBodyLength - d) / 10) return -1;
      v = v * 10 + d;
      ++p;
    }
    if (p == s) return -1;
    if (result >= 0 && static_cast<int64_t>(v) != result) return -1;
    result = static_cast<int64_t>(v);
    while (p < e && IsOws(*p)) ++p;
    if (p == e) return result;
    if (*p != ',') return -1;
    ++p;
    while (p < e && IsOws(*p)) ++p;
  }
}

// Does an Upgrade value offer a protocol we might switch to? h2c does not count: we speak
// HTTP/2 over cleartext by prior knowledge only (RFC 9113 3.3 dropped the upgrade), and a
// proxied "Upgrade: h2c" is the known way to smuggle a request past a proxy's rules.
bool OffersUpgrade(std::string_view value) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view protocol = trim_ows(value.substr(0, comma));
    if (!protocol.empty() && !token_is(protocol, "h2c")) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// Walks a comma-separated list of tokens (RFC 9110 5.6.1), empty elements allowed, calling
// fn(token, length) for each. `params` lets an element carry ";..." parameters, which end the
// walk (fn sees the token with has_params = true). Returns false on a syntax error.
template <typename Fn>
bool ForEachToken(const char* p, const char* e, Fn&& fn) {
  while (p < e) {
    if (*p == ',' || IsOws(*p)) {
      ++p;
      continue;
    }
    const char* s = p;
    while (p < e && Is(*p, kTchar)) ++p;
    if (p == s) return false;
    const char* te = p;
    while (p < e && IsOws(*p)) ++p;
    if (p < e && *p == ';') return fn(s, static_cast<size_t>(te - s), true);
    if (p < e && *p != ',') return false;
    if (!fn(s, static_cast<size_t>(te - s), false)) return false;
  }
  return true;
}

Method MethodFromToken(const char* m, size_t len) {
  switch (len) {
    case 3:
      if (std::memcmp(m, "GET", 3) == 0) return Method::kGet;
      if (std::memcmp(m, "PUT", 3) == 0) return Method::kPut;
      break;
    case 4:
      if (std::memcmp(m, "POST", 4) == 0) return Method::kPost;
      if (std::memcmp(m, "HEAD", 4) == 0) return Method::kHead;
      break;
    case 5:
      if (std::memcmp(m, "PATCH", 5) == 0) return Method::kPatch;
      if (std::memcmp(m, "TRACE", 5) == 0) return Method::kTrace;
      break;
    case 6:
      if (std::memcmp(m, "DELETE", 6) == 0) return Method::kDelete;
      break;
    case 7:
      if (std::memcmp(m, "OPTIONS", 7) == 0) return Method::kOptions;
      if (std::memcmp(m, "CONNECT", 7) == 0) return Method::kConnect;
      break;
    default:
      break;
  }
  return Method::kUnknown;
}

// Parses a complete head: [p, end) runs from the request line to the final CRLF CRLF inclusive,
// and holds no bare LF (the scan checked). Fills `out`; returns kDone or kError.
ParseResult ParseHead(const char* p, const char* const end, const ParserLimits& limits,
                      Request& out) {
  // ---- Request line: method SP request-target SP HTTP-version CRLF ----
  const char* const m = p;
  if (std::memcmp(p, "GET ", 4) == 0) {  // the head is at least 5 bytes
    out.method = Method::kGet;
    p += 3;
  } else {
    while (Is(*p, kTchar)) ++p;
    if (p == m || *p != ' ') return Fail(400, "invalid method");
    out.method = MethodFromToken(m, static_cast<size_t>(p - m));
  }
  out.method_text = std::string_view(m, static_cast<size_t>(p - m));
  const Method method = out.method;

  const char* const t = ++p;
  p = ScanTarget<true>(p, end);
  const char* q = nullptr;
  if (*p == '?') {
    q = p;
    p = ScanTarget<false>(p + 1, end);
  }
  const char* const te = p;
  const size_t target_len = static_cast<size_t>(te - t);
  if (target_len > limits.max_target_bytes) return Fail(414, "request-target too long");
  if (*p != ' ') {
    if (*p == '#') return Fail(400, "fragment in request-target");
    if (*p == '\r') return Fail(400, "missing HTTP version");
    return Fail(400, "invalid character in request-target");
  }
  if (target_len == 0) return Fail(400, "empty request-target");
  ++p;

  // HTTP-version: "HTTP/" DIGIT "." DIGIT, then CRLF.
  if (end - p < 10) return Fail(400, "malformed HTTP version");
  uint64_t version;
  std::memcpy(&version, p, 8);
  if ((version == Load8("HTTP/1.1") || version == Load8("HTTP/1.0")) && p[8] == '\r' &&
      p[9] == '\n') {
    out.version_minor = static_cast<uint8_t>(p[7] - '0');
  } else if (std::memcmp(p, "HTTP/", 5) == 0 && IsDigit(p[5]) && p[6] == '.' && IsDigit(p[7]) &&
             p[8] == '\r' && p[9] == '\n') {
    // RFC 9110 2.5: a higher minor version of a major version we implement is processed as
    // the highest minor we implement; other majors (0.9, 2.0 as in the h2 preface) are not ours.
    if (p[5] != '1') return Fail(505, "unsupported HTTP version");
    out.version_minor = 1;
  } else {
    return Fail(400, "malformed HTTP version");
  }
  p += 10;
  const uint8_t minor = out.version_minor;

  // ---- request-target form (RFC 9112 3.2) ----
  out.target = std::string_view(t, target_len);
  out.authority = {};
  out.query = q ? std::string_view(q + 1, static_cast<size_t>(te - q - 1)) : std::string_view();
  const char* path_end = q ? q : te;
  bool absolute = false;
  if (*t == '/') {
    if (method == Method::kConnect) return Fail(400, "CONNECT needs authority-form");
    out.raw_path = std::string_view(t, static_cast<size_t>(path_end - t));
  } else if (*t == '*' && target_len == 1) {
    if (method != Method::kOptions) return Fail(400, "asterisk-form only with OPTIONS");
    out.raw_path = out.target;
  } else if (method == Method::kConnect) {
    if (q || !ValidHostPort(t, te, /*require_port=*/true)) {
      return Fail(400, "invalid authority-form");
    }
    out.authority = out.target;
    out.raw_path = {};
  } else {
    // absolute-form: "http://" or "https://", case-insensitive.
    size_t scheme = 0;
    if (target_len > 7 && (t[0] | 0x20) == 'h' && (t[1] | 0x20) == 't' && (t[2] | 0x20) == 't' &&
        (t[3] | 0x20) == 'p') {
      if (std::memcmp(t + 4, "://", 3) == 0) {
        scheme = 4;
      } else if ((t[4] | 0x20) == 's' && target_len > 8 && std::memcmp(t + 5, "://", 3) == 0) {
        scheme = 5;
      }
    }
    if (scheme == 0) return Fail(400, "invalid request-target");
    const char* a = t + scheme + 3;
    const char* ae = a;
    while (ae < path_end && *ae != '/') ++ae;
    if (!ValidHostPort(a, ae, /*require_port=*/false)) {
      return Fail(400, "invalid authority in absolute-form");
    }
    out.authority = std::string_view(a, static_cast<size_t>(ae - a));
    if (ae < path_end) {
      out.raw_path = std::string_view(ae, static_cast<size_t>(path_end - ae));
    } else {
      // Empty path means "/" (RFC 9112 3.2.2); point at the '/' of "://" so that the view
      // still lies inside the buffer.
      out.raw_path = std::string_view(t + scheme + 1, 1);
    }
    absolute = true;
  }

  // ---- Header fields ----
  const char* const last = end - 2;  // the final CRLF
  uint16_t count = 0;
  int host_count = 0;
  std::string_view host_value;
  uint16_t host_index = 0;
  int64_t content_length = -1;
  bool te_seen = false, te_unknown = false, te_chunked_last = false;
  int te_chunked_count = 0;
  bool conn_close = false, conn_keep_alive = false, conn_upgrade = false;
  bool upgrade_header = false, expect_continue = false, expect_failed = false;

  while (p != last) {
    const char* const n = p;
    while (Is(*p, kTchar)) ++p;
    if (*p != ':') {
      if (p == n && IsOws(*p)) return Fail(400, "obsolete line folding");
      if (p != n && IsOws(*p)) return Fail(400, "whitespace before colon");
      return Fail(400, "invalid header name");
    }
    const size_t name_len = static_cast<size_t>(p - n);
    if (name_len == 0) return Fail(400, "empty header name");
    ++p;
    while (IsOws(*p)) ++p;
    const char* const v = p;
    p = SkipFieldValue(p, end);
    if (*p != '\r') return Fail(400, "invalid character in header value");
    if (p[1] != '\n') return Fail(400, "bare CR in header");
    const char* ve = p;
    while (ve > v && IsOws(ve[-1])) --ve;
    p += 2;
    if (count == kMaxHeaders) return Fail(431, "too many header fields");
    Header& h = out.headers[count++];
    h.name = std::string_view(n, name_len);
    h.value = std::string_view(v, static_cast<size_t>(ve - v));

    switch (name_len) {
      case 4:
        if (token_is(h.name, "host")) {
          if (++host_count > 1) return Fail(400, "duplicate Host");
          if (ve != v && !ValidHostPort(v, ve, false)) return Fail(400, "invalid Host");
          host_value = h.value;
          host_index = count - 1;
        }
        break;
      case 6:
        if (token_is(h.name, "expect")) {
          if (token_is(h.value, "100-continue")) {
            // RFC 9110 10.1.1: ignored in an HTTP/1.0 request.
            expect_continue = (minor == 1);
          } else if (ve != v) {
            expect_failed = true;
          }
        }
        break;
      case 7:
        if (token_is(h.name, "upgrade")) upgrade_header |= OffersUpgrade(h.value);
        break;
      case 10:
        if (token_is(h.name, "connection")) {
          bool ok = ForEachToken(v, ve, [&](const char* s, size_t len, bool params) {
            if (params) return false;
            conn_close |= token_is({s, len}, "close");
            conn_keep_alive |= token_is({s, len}, "keep-alive");
            conn_upgrade |= token_is({s, len}, "upgrade");
            return true;
          });
          if (!ok) return Fail(400, "invalid Connection");
        }
        break;
      case 14:
        if (token_is(h.name, "content-length")) {
          int64_t cl = ParseContentLength(v, ve);
          if (cl < 0) return Fail(400, "invalid Content-Length");
          if (content_length >= 0 && cl != content_length) {
            return Fail(400, "conflicting Content-Length");
          }
          content_length = cl;
        }
        break;
      case 17:
        if (token_is(h.name, "transfer-encoding")) {
          te_seen = true;
          bool ok = ForEachToken(v, ve, [&](const char* s, size_t len, bool params) {
            if (token_is({s, len}, "chunked")) {
              if (params) return false;
              ++te_chunked_count;
              te_chunked_last = true;
            } else {
              te_unknown = true;
              te_chunked_last = false;
            }
            return true;
          });
          if (!ok) return Fail(400, "invalid Transfer-Encoding");
        }
        break;
      default:
        break;
    }
  }
  out.header_count = count;

  // ---- Checks over the whole head ----
  if (minor == 1 && host_count == 0) return Fail(400, "missing Host");
  bool chunked = false;
  if (te_seen) {
    // RFC 9112 6.1-6.3: the framing must be unambiguous, or the request could be smuggled.
    if (minor == 0) return Fail(400, "Transfer-Encoding in HTTP/1.0");
    if (content_length >= 0) return Fail(400, "Transfer-Encoding with Content-Length");
    if (te_chunked_count > 1) return Fail(400, "chunked applied twice");
    if (te_unknown) return Fail(501, "unsupported transfer coding");
    if (!te_chunked_last) return Fail(400, "invalid Transfer-Encoding");
    chunked = true;
  }
  if (expect_failed) return Fail(417, "unsupported expectation");

  if (absolute) {
    // RFC 9112 3.2.2: the target's authority wins over Host. Everyone downstream (the proxy's
    // Host, FastCGI's HTTP_HOST, AJP's header list) reads the field, so the field carries the
    // authority that was routed on, never a second name for a back end to act on.
    if (host_count == 0) {
      if (count == kMaxHeaders) return Fail(431, "too many header fields");
      out.headers[count++].name = "Host";
      out.header_count = count;
      host_index = count - 1;
    }
    out.headers[host_index].value = out.authority;
    out.host = out.authority;
  } else {
    out.host = host_value;
  }
  out.content_length = content_length;
  out.chunked = chunked;
  out.keep_alive = !conn_close && (minor == 1 || conn_keep_alive);
  out.expect_continue = expect_continue;
  out.upgrade = conn_upgrade && upgrade_header;

  ParseResult r;
  r.status = ParseStatus::kDone;
  return r;
}

}  // namespace

ParseResult RequestParser::parse(std::string_view buffer, Request& out) {
  const char* const buf = buffer.data();
  const size_t size = buffer.size();
  const size_t max_head = limits_.max_head_bytes;
  // Only the first max_head bytes can belong to an acceptable head.
  const size_t window = size < max_head ? size : max_head;
  size_t pos = scanned_;

  // Bytes past the window exist: the head is over its limit (cold path).
  auto over_limit = [&]() -> ParseResult {
    if (phase_ == Phase::kLeadingLines) return Fail(431, "request head too large");
    if (phase_ == Phase::kRequestLine) return Fail(414, "request line too long");
    // The request line is complete: 414 if its target is what is too long.
    const char* ls = buf + line_start_;
    const char* le = static_cast<const char*>(std::memchr(ls, '\n', window - line_start_));
    const char* sp1 = static_cast<const char*>(std::memchr(ls, ' ', static_cast<size_t>(le - ls)));
    const char* sp2 = le;
    while (sp2 > ls && *sp2 != ' ') --sp2;
    if (sp1 && sp2 > sp1 && static_cast<size_t>(sp2 - sp1 - 1) > limits_.max_target_bytes) {
      return Fail(414, "request-target too long");
    }
    return Fail(431, "request head too large");
  };
  auto fail = [&](int status, const char* reason) {
    reset();
    return Fail(status, reason);
  };

  if (phase_ == Phase::kLeadingLines) {
    // RFC 9112 2.2: skip empty lines before the request line.
    for (;;) {
      if (pos >= window) {
        scanned_ = static_cast<uint32_t>(pos);
        if (size > window) {
          ParseResult r = over_limit();
          reset();
          return r;
        }
        return {};
      }
      const char c = buf[pos];
      if (c == '\r') {
        if (pos + 1 >= window) {
          scanned_ = static_cast<uint32_t>(pos);
          if (size > window) {
            ParseResult r = over_limit();
            reset();
            return r;
          }
          return {};
        }
        if (buf[pos + 1] != '\n') return fail(400, "bare CR");
        pos += 2;
        continue;
      }
      if (c == '\n') return fail(400, "bare LF");
      break;
    }
    line_start_ = static_cast<uint32_t>(pos);
    phase_ = Phase::kRequestLine;
  }

  if (phase_ == Phase::kRequestLine) {
    const size_t allowance = limits_.max_target_bytes + kRequestLineSlack + 2;
    const size_t line_cap =
        allowance < limits_.max_target_bytes ? window : line_start_ + allowance;  // saturate
    const size_t w = window < line_cap ? window : line_cap;
    const size_t i = pos < w ? FindLf(buf, pos, w) : w;
    if (i >= w) {
      scanned_ = static_cast<uint32_t>(w > pos ? w : pos);
      if (size > w) {
        ParseResult r = over_limit();
        reset();
        return r;
      }
      return {};
    }
    // buf[line_start_] is neither CR nor LF, so i > line_start_.
    if (buf[i - 1] != '\r') return fail(400, "bare LF");
    pos = i + 1;
    phase_ = Phase::kFields;
  }

  // Phase::kFields: every LF so far ended a line with CR; find CRLF CRLF.
  for (;;) {
    const size_t i = pos < window ? FindLf(buf, pos, window) : window;
    if (i >= window) {
      scanned_ = static_cast<uint32_t>(window > pos ? window : pos);
      if (size > window) {
        ParseResult r = over_limit();
        reset();
        return r;
      }
      return {};
    }
    // The request line ends at least 2 bytes after line_start_, so i - 3 >= line_start_.
    if (buf[i - 1] != '\r') return fail(400, "bare LF");
    if (buf[i - 2] == '\n' && buf[i - 3] == '\r') {
      const size_t head_end = i + 1;
      const size_t start = line_start_;
      reset();
      ParseResult r = ParseHead(buf + start, buf + head_end, limits_, out);
      if (r.status == ParseStatus::kDone) r.head_length = head_end;
      return r;
    }
    pos = i + 1;
  }
}

// ---- Chunked transfer coding (RFC 9112 7.1) ----

namespace {
constexpr uint32_t kMaxChunkSizeDigits = 16;
constexpr uint32_t kMaxChunkLineBytes = 4096;  // size line without its CRLF
constexpr uint32_t kMaxTrailerBytes = 16384;
}  // namespace

ChunkedDecoder::Result ChunkedDecoder::decode(std::string_view input) {
  const char* const begin = input.data();
  const char* const end = begin + input.size();
  const char* p = begin;
  Result r;
  auto error = [&]() {
    state_ = State::kError;
    r.status = Status::kError;
    r.consumed = static_cast<size_t>(p - begin);
    return r;
  };
  if (state_ == State::kDone) {
    r.status = Status::kDone;
    return r;
  }
  if (state_ == State::kError) return error();

  while (p < end) {
    const unsigned char c = static_cast<unsigned char>(*p);
    switch (state_) {
      case State::kSize: {
        const int d = HexValue(c);
        if (d >= 0) {
          if (++size_digits_ > kMaxChunkSizeDigits) return error();
          if (chunk_remaining_ > (kMaxBodyLength - static_cast<uint64_t>(d)) / 16) return error();
          chunk_remaining_ = chunk_remaining_ * 16 + static_cast<uint64_t>(d);
          ++line_bytes_;
          ++p;
          continue;
        }
        if (size_digits_ == 0) return error();
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == ';') {
          state_ = State::kExtStart;
        } else if (c == ' ' || c == '\t') {
          state_ = State::kSizeBws;
        } else {
          return error();
        }
        break;
      }
      case State::kSizeBws:  // BWS is allowed only before ";"
        if (c == ';') {
          state_ = State::kExtStart;
        } else if (c != ' ' && c != '\t') {
          return error();
        }
        break;
      case State::kExtStart:  // BWS chunk-ext-name
        if (Is(static_cast<char>(c), kTchar)) {
          state_ = State::kExt;
        } else if (c != ' ' && c != '\t') {
          return error();
        }
        break;
      case State::kExt:  // the rest: name, "=", value, further extensions; no CTL but HTAB
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (!Is(static_cast<char>(c), kValueChar) && c != '\t') {
          return error();
        }
        break;
      case State::kSizeLf:
        if (c != '\n') return error();
        ++p;
        line_bytes_ = 0;
        size_digits_ = 0;
        state_ = chunk_remaining_ == 0 ? State::kTrailerStart : State::kData;
        continue;
      case State::kData: {
        const size_t avail = static_cast<size_t>(end - p);
        const size_t n = chunk_remaining_ < avail ? static_cast<size_t>(chunk_remaining_) : avail;
        r.status = Status::kData;
        r.data = std::string_view(p, n);
        p += n;
        chunk_remaining_ -= n;
        body_bytes_ += n;
        if (chunk_remaining_ == 0) state_ = State::kDataCr;
        r.consumed = static_cast<size_t>(p - begin);
        return r;
      }
      case State::kDataCr:
        if (c != '\r') return error();
        state_ = State::kDataLf;
        ++p;
        continue;
      case State::kDataLf:
        if (c != '\n') return error();
        state_ = State::kSize;
        ++p;
        continue;
      case State::kTrailerStart:
        if (c == '\r') {
          state_ = State::kFinalLf;
        } else if (Is(static_cast<char>(c), kTchar)) {
          state_ = State::kTrailerName;
        } else {
          return error();  // obs-fold, bare LF, or not a field-name
        }
        break;
      case State::kTrailerName:
        if (c == ':') {
          state_ = State::kTrailerValue;
        } else if (!Is(static_cast<char>(c), kTchar)) {
          return error();
        }
        break;
      case State::kTrailerValue:
        if (c == '\r') {
          state_ = State::kTrailerLf;
        } else if (!Is(static_cast<char>(c), kValueChar) && c != '\t') {
          return error();
        }
        break;
      case State::kTrailerLf:
        if (c != '\n') return error();
        state_ = State::kTrailerStart;
        break;
      case State::kFinalLf:
        if (c != '\n') return error();
        ++p;
        state_ = State::kDone;
        r.status = Status::kDone;
        r.consumed = static_cast<size_t>(p - begin);
        return r;
      case State::kDone:
      case State::kError:
        return error();  // unreachable: handled before the loop
    }
    // Bytes of the size line (extensions and CR included, so "+ 1") or of the trailer
    // section, bounded.
    const uint32_t cap = state_ >= State::kTrailerStart ? kMaxTrailerBytes : kMaxChunkLineBytes + 1;
    if (++line_bytes_ > cap) return error();
    ++p;
  }
  r.status = Status::kNeedMore;
  r.consumed = input.size();
  return r;
}

}  // namespace peregrine::http1
