// libFuzzer target for the HTTP/1 request parser and the chunked decoder.
//
// For every input it checks, and traps on violation:
//   - verdict invariants: head_length within the buffer and the limit and ending in CRLF CRLF;
//     every view inside the head (but the name of the Host field an absolute-form request
//     without one gets); an absolute-form target's authority is the one Host field's value; names
//     are tokens, values trimmed and free of CR/LF/NUL; framing is unambiguous; error statuses are
//     among those documented; kNeedMore is never returned for a buffer already over the head limit;
//   - resumption: parsing a data-derived prefix and then the whole buffer, or the buffer one byte
//     more at a time, gives exactly the one-shot verdict;
//   - pipelining: after kDone the body is skipped (Content-Length) or decoded (chunked) and the
//     next request is parsed, as a connection would;
//   - the chunked decoder: fed whole, in two pieces or byte by byte, it yields the same body,
//     verdict and consumed count; data runs lie inside the input and are never empty.
// Built with -fsanitize=fuzzer for fuzzing, and linked with tests/fuzz/replay_main.cc to replay
// the corpus in ordinary test runs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "http/http1/parser.h"

namespace {

using peregrine::Header;
using peregrine::kMaxHeaders;
using peregrine::Method;
using peregrine::Request;
using peregrine::http1::ChunkedDecoder;
using peregrine::http1::ParseResult;
using peregrine::http1::ParserLimits;
using peregrine::http1::ParseStatus;
using peregrine::http1::RequestParser;

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

constexpr int64_t kMaxBody = int64_t{1} << 62;

uint64_t Hash(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ULL;
  return h;
}

bool Inside(std::string_view v, const char* begin, const char* end) {
  if (v.empty()) return v.data() == nullptr || (v.data() >= begin && v.data() <= end);
  return v.data() >= begin && v.data() + v.size() <= end;
}

bool IsTchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool IsHost(std::string_view name) {
  return name.size() == 4 && (name[0] | 0x20) == 'h' && (name[1] | 0x20) == 'o' &&
         (name[2] | 0x20) == 's' && (name[3] | 0x20) == 't';
}

bool SameView(std::string_view a, std::string_view b) {
  return a.data() == b.data() && a.size() == b.size();
}

void CheckRequest(std::string_view buf, size_t head_length, const ParserLimits& limits,
                  const Request& r) {
  const char* b = buf.data();
  const char* e = b + head_length;
  for (std::string_view v : {r.method_text, r.target, r.raw_path, r.query, r.authority, r.host}) {
    FUZZ_CHECK(Inside(v, b, e));
  }
  FUZZ_CHECK(!r.method_text.empty());
  for (char c : r.method_text) FUZZ_CHECK(IsTchar(static_cast<unsigned char>(c)));
  if (r.method != Method::kUnknown) {
    FUZZ_CHECK(peregrine::method_name(r.method) == r.method_text);
  } else {
    for (int m = 0; m < static_cast<int>(Method::kUnknown); ++m) {
      FUZZ_CHECK(peregrine::method_name(static_cast<Method>(m)) != r.method_text);
    }
  }
  FUZZ_CHECK(!r.target.empty() && r.target.size() <= limits.max_target_bytes);
  for (char c : r.target) {
    FUZZ_CHECK(c > 0x20 && c < 0x7f && c != '#');
  }
  FUZZ_CHECK(r.version_minor == 0 || r.version_minor == 1);
  FUZZ_CHECK(r.header_count <= kMaxHeaders);
  size_t hosts = 0;
  for (const Header& h : r.header_list()) {
    if (IsHost(h.name)) ++hosts;
    // An absolute-form target without a Host field gets one, last, carrying the target's
    // authority (RFC 9112 3.2.2): its name is the parser's own text, not a view of the input.
    if (!Inside(h.name, b, e)) {
      FUZZ_CHECK(h.name == "Host" && &h == &r.headers[r.header_count - 1]);
      FUZZ_CHECK(!r.authority.empty() && SameView(h.value, r.authority));
      continue;
    }
    FUZZ_CHECK(Inside(h.name, b, e) && Inside(h.value, b, e));
    FUZZ_CHECK(!h.name.empty());
    for (char c : h.name) FUZZ_CHECK(IsTchar(static_cast<unsigned char>(c)));
    for (char c : h.value) FUZZ_CHECK(c != '\r' && c != '\n' && c != '\0');
    if (!h.value.empty()) {
      FUZZ_CHECK(h.value.front() != ' ' && h.value.front() != '\t');
      FUZZ_CHECK(h.value.back() != ' ' && h.value.back() != '\t');
    }
  }
  FUZZ_CHECK(r.content_length >= -1 && r.content_length <= kMaxBody);
  FUZZ_CHECK(!(r.chunked && r.content_length >= 0));
  if (r.chunked) FUZZ_CHECK(r.version_minor == 1);
  if (r.version_minor == 1) FUZZ_CHECK(r.header("host").has_value());
  if (r.version_minor == 0) FUZZ_CHECK(!r.expect_continue);
  if (r.method == Method::kConnect) {
    FUZZ_CHECK(SameView(r.authority, r.target));
  } else {
    FUZZ_CHECK(!r.raw_path.empty());
  }
  if (!r.authority.empty() && r.method != Method::kConnect) {
    // The one Host field names what was routed on, so no later hop reads a second name.
    FUZZ_CHECK(SameView(r.host, r.authority));
    const std::optional<std::string_view> host = r.header("host");
    FUZZ_CHECK(hosts == 1 && host && SameView(*host, r.authority));
  }
}

void CheckResult(std::string_view buf, const ParserLimits& limits, const ParseResult& res,
                 const Request& r) {
  switch (res.status) {
    case ParseStatus::kDone:
      FUZZ_CHECK(res.head_length >= 5 && res.head_length <= buf.size());
      FUZZ_CHECK(res.head_length <= limits.max_head_bytes);
      FUZZ_CHECK(std::memcmp(buf.data() + res.head_length - 4, "\r\n\r\n", 4) == 0);
      CheckRequest(buf, res.head_length, limits, r);
      break;
    case ParseStatus::kError:
      FUZZ_CHECK(res.error_status == 400 || res.error_status == 414 || res.error_status == 417 ||
                 res.error_status == 431 || res.error_status == 501 || res.error_status == 505);
      FUZZ_CHECK(res.error_reason != nullptr && res.error_reason[0] != '\0');
      break;
    case ParseStatus::kNeedMore:
      FUZZ_CHECK(buf.size() <= limits.max_head_bytes);
      break;
  }
}

bool SameRequest(const Request& a, const Request& b) {
  if (!SameView(a.method_text, b.method_text) || !SameView(a.target, b.target) ||
      !SameView(a.raw_path, b.raw_path) || !SameView(a.query, b.query) ||
      !SameView(a.authority, b.authority) || !SameView(a.host, b.host)) {
    return false;
  }
  if (a.method != b.method || a.version_minor != b.version_minor ||
      a.header_count != b.header_count || a.content_length != b.content_length ||
      a.chunked != b.chunked || a.keep_alive != b.keep_alive ||
      a.expect_continue != b.expect_continue || a.upgrade != b.upgrade) {
    return false;
  }
  for (uint16_t i = 0; i < a.header_count; ++i) {
    if (!SameView(a.headers[i].name, b.headers[i].name) ||
        !SameView(a.headers[i].value, b.headers[i].value)) {
      return false;
    }
  }
  return true;
}

void CheckSame(const ParseResult& x, const Request& rx, const ParseResult& y, const Request& ry) {
  FUZZ_CHECK(x.status == y.status);
  if (x.status == ParseStatus::kDone) {
    FUZZ_CHECK(x.head_length == y.head_length);
    FUZZ_CHECK(SameRequest(rx, ry));
  } else if (x.status == ParseStatus::kError) {
    FUZZ_CHECK(x.error_status == y.error_status);
    FUZZ_CHECK(std::strcmp(x.error_reason, y.error_reason) == 0);
  }
}

// Parses `buf` after first parsing its prefix of `cut` bytes with the same parser.
ParseResult ParseResumed(std::string_view buf, size_t cut, const ParserLimits& limits,
                         Request& req) {
  RequestParser p(limits);
  ParseResult r = p.parse(buf.substr(0, cut), req);
  if (r.status != ParseStatus::kNeedMore) return r;
  return p.parse(buf, req);
}

ParseResult ParseByteAtATime(std::string_view buf, const ParserLimits& limits, Request& req) {
  RequestParser p(limits);
  ParseResult r;
  for (size_t n = 0; n <= buf.size(); ++n) {
    r = p.parse(buf.substr(0, n), req);
    if (r.status != ParseStatus::kNeedMore) break;
  }
  return r;
}

struct Decoded {
  ChunkedDecoder::Status status = ChunkedDecoder::Status::kNeedMore;
  size_t consumed = 0;
  std::string body;
};

// Decodes `input`, first with only `cut` bytes available, then all of it (cut == SIZE_MAX:
// one byte more per step). Checks the per-call invariants.
Decoded Decode(std::string_view input, size_t cut) {
  ChunkedDecoder d;
  Decoded out;
  const bool bytewise = cut == SIZE_MAX;
  size_t received = bytewise ? 0 : (cut < input.size() ? cut : input.size());
  for (;;) {
    std::string_view avail = input.substr(out.consumed, received - out.consumed);
    ChunkedDecoder::Result r = d.decode(avail);
    FUZZ_CHECK(r.consumed <= avail.size());
    out.consumed += r.consumed;
    out.status = r.status;
    if (r.status == ChunkedDecoder::Status::kData) {
      FUZZ_CHECK(!r.data.empty());
      FUZZ_CHECK(r.data.data() >= avail.data());
      FUZZ_CHECK(r.data.data() + r.data.size() == avail.data() + r.consumed);
      out.body.append(r.data);
      FUZZ_CHECK(d.body_bytes() == out.body.size());
      continue;
    }
    if (r.status == ChunkedDecoder::Status::kNeedMore) {
      FUZZ_CHECK(r.consumed == avail.size());
      if (received < input.size()) {
        received = bytewise ? received + 1 : input.size();
        continue;
      }
    }
    break;
  }
  if (out.status == ChunkedDecoder::Status::kDone) {
    // Sticky, and nothing more is consumed.
    ChunkedDecoder::Result again = d.decode(input.substr(out.consumed));
    FUZZ_CHECK(again.status == ChunkedDecoder::Status::kDone && again.consumed == 0);
  }
  return out;
}

// Decodes a chunked body one-shot, split and byte by byte; all must agree. Returns the one-shot.
Decoded CheckChunked(std::string_view input, uint64_t h) {
  Decoded one = Decode(input, input.size());
  Decoded split = Decode(input, input.empty() ? 0 : h % (input.size() + 1));
  FUZZ_CHECK(one.status == split.status && one.consumed == split.consumed &&
             one.body == split.body);
  if (input.size() <= 2048) {
    Decoded bytewise = Decode(input, SIZE_MAX);
    FUZZ_CHECK(one.status == bytewise.status && one.consumed == bytewise.consumed &&
               one.body == bytewise.body);
  }
  return one;
}

// One request at the start of `buf`: one-shot, resumed at a data-derived cut and byte by byte
// must all agree. Returns the one-shot verdict (in `req`).
ParseResult CheckOneRequest(std::string_view buf, const ParserLimits& limits, uint64_t h,
                            Request& req, Request& scratch) {
  RequestParser p(limits);
  ParseResult one = p.parse(buf, req);
  CheckResult(buf, limits, one, req);

  // A parser is reusable after a verdict without reset(): the same buffer gives the same verdict.
  if (one.status != ParseStatus::kNeedMore) {
    ParseResult again = p.parse(buf, scratch);
    CheckSame(one, req, again, scratch);
  }

  const size_t cut = buf.empty() ? 0 : h % (buf.size() + 1);
  ParseResult resumed = ParseResumed(buf, cut, limits, scratch);
  CheckSame(one, req, resumed, scratch);

  if (buf.size() <= 4096) {
    ParseResult bytewise = ParseByteAtATime(buf, limits, scratch);
    CheckSame(one, req, bytewise, scratch);
  }
  return one;
}

void Run(std::string_view input, const ParserLimits& limits, uint64_t h) {
  static Request req;
  static Request scratch;
  std::string_view rest = input;
  for (int i = 0; i < 8 && !rest.empty(); ++i) {
    req.clear();
    ParseResult r = CheckOneRequest(rest, limits, h + static_cast<uint64_t>(i), req, scratch);
    if (r.status != ParseStatus::kDone) return;
    (void)req.header("Content-Type");
    rest.remove_prefix(r.head_length);
    if (req.chunked) {
      Decoded d = CheckChunked(rest, h >> 7);
      if (d.status != ChunkedDecoder::Status::kDone) return;
      rest.remove_prefix(d.consumed);
    } else if (req.content_length > 0) {
      if (rest.size() < static_cast<uint64_t>(req.content_length)) return;
      rest.remove_prefix(static_cast<size_t>(req.content_length));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const uint64_t h = Hash(data, size);

  // Default limits, as the server runs.
  Run(input, ParserLimits{}, h);

  // Small data-derived limits, so that the limit paths are reached by small inputs.
  ParserLimits small;
  small.max_head_bytes = 8 + static_cast<size_t>(h % 500);
  small.max_target_bytes = 1 + static_cast<size_t>((h >> 16) % 300);
  Run(input, small, h >> 3);

  // The decoder on the raw input too, so it is fuzzed directly.
  CheckChunked(input, h >> 11);
  return 0;
}
