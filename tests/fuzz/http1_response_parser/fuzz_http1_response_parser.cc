// libFuzzer target for the HTTP/1 response parser (http1::ResponseParser).
//
// The first input byte picks the options (HEAD request or not, a small head limit); the rest is
// what a server sent. For every input it checks, and traps on violation:
//   - consumed counts stay within the input, and nothing is consumed while the head is incomplete;
//   - resumption: fed whole, in two data-derived pieces, or a byte at a time, the parser gives the
//     same sequence of verdicts, consumed totals, statuses and body sizes (pipelined responses are
//     parsed in turn, as a connection would);
//   - after kDone: body_bytes() <= body_wire_bytes(); a Content-Length body has exactly that many
//     bytes; HEAD, 204 and 304 have none; keep_alive() is false for close-delimited bodies;
//     finish() after kDone stays kDone;
//   - the status is 200-999 (1xx are skipped), error() is non-empty on kError.
// Built with -fsanitize=fuzzer for fuzzing; linked with tests/fuzz/replay_main.cc to replay the
// corpus in ordinary test runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/http1/response_parser.h"

namespace {

using peregrine::http1::BodyFraming;
using peregrine::http1::ResponseParser;
using Status = ResponseParser::Status;

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

struct Verdict {
  Status status;
  size_t end;  // offset in the input where this response ended (kDone) or where parsing stopped
  int code;
  uint64_t body;
  uint64_t wire;
  bool keep;
  bool operator==(const Verdict& o) const {
    return status == o.status && end == o.end && code == o.code && body == o.body &&
           wire == o.wire && keep == o.keep;
  }
};

void CheckDone(const ResponseParser& p, bool head_request) {
  const auto& h = p.head();
  FUZZ_CHECK(h.status >= 200 && h.status <= 999);
  FUZZ_CHECK(p.body_bytes() <= p.body_wire_bytes());
  if (head_request || h.status == 204 || h.status == 304) FUZZ_CHECK(p.body_wire_bytes() == 0);
  if (p.framing() == BodyFraming::kLength) {
    FUZZ_CHECK(h.content_length >= 0 && p.body_bytes() == static_cast<uint64_t>(h.content_length));
    FUZZ_CHECK(p.body_wire_bytes() == p.body_bytes());
  }
  if (p.framing() == BodyFraming::kClose) FUZZ_CHECK(!p.keep_alive());
  if (h.connection_close) FUZZ_CHECK(!p.keep_alive());
}

// Parses up to 8 responses from `input`, delivering it `step` bytes at a time (0: first `cut`
// bytes, then the rest). Returns the verdicts.
std::vector<Verdict> Run(std::string_view input, bool head_request, ResponseParser::Limits limits,
                         size_t step, size_t cut) {
  std::vector<Verdict> out;
  ResponseParser p(limits);
  p.start(head_request, true);
  std::string pending;
  size_t base = 0;       // input offset of pending[0]
  size_t delivered = 0;  // input bytes handed over so far
  bool first = true;
  for (int responses = 0; responses < 8;) {
    size_t take = step ? step : (first ? cut : input.size());
    first = false;
    take = std::min(take, input.size() - delivered);
    pending.append(input.substr(delivered, take));
    delivered += take;
    bool progressed = true;
    while (progressed && responses < 8) {
      progressed = false;
      const bool had_head = p.head_complete();
      ResponseParser::Result r = p.parse(pending);
      FUZZ_CHECK(r.consumed <= pending.size());
      if (!had_head && !p.head_complete()) FUZZ_CHECK(r.consumed == 0);
      pending.erase(0, r.consumed);
      base += r.consumed;
      if (r.status == Status::kError) {
        FUZZ_CHECK(p.error()[0] != '\0');
        out.push_back({Status::kError, base, 0, 0, 0, false});
        return out;
      }
      if (r.status == Status::kDone) {
        CheckDone(p, head_request);
        FUZZ_CHECK(p.finish().status == Status::kDone);
        out.push_back({Status::kDone, base, p.head().status, p.body_bytes(), p.body_wire_bytes(),
                       p.keep_alive()});
        ++responses;
        if (!p.keep_alive()) return out;
        p.start(head_request, true);
        progressed = !pending.empty();
      }
    }
    if (delivered == input.size()) break;
  }
  if (out.size() < 8) {
    ResponseParser::Result r = p.finish();
    if (r.status == Status::kDone) {
      CheckDone(p, head_request);
      out.push_back({Status::kDone, base + pending.size(), p.head().status, p.body_bytes(),
                     p.body_wire_bytes(), p.keep_alive()});
    } else {
      out.push_back({r.status, base, 0, 0, 0, false});
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool head_request = flags & 1;
  ResponseParser::Limits limits;
  if (flags & 2) {
    limits.max_head_bytes = 16 + (flags >> 2) * 4;
    limits.max_interim = 2;
  }
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ULL;
  const std::vector<Verdict> whole = Run(input, head_request, limits, 0, input.size());
  const std::vector<Verdict> split =
      Run(input, head_request, limits, 0, input.empty() ? 0 : h % (input.size() + 1));
  FUZZ_CHECK(whole == split);
  if (input.size() <= 4096) {
    const std::vector<Verdict> bytewise = Run(input, head_request, limits, 1, 0);
    FUZZ_CHECK(whole == bytewise);
  }
  return 0;
}
