// libFuzzer target for the FastCGI protocol layer (handlers/fastcgi/protocol.h).
//
// Input: byte 0 picks options (request id, split point, CGI head limit), the rest is what a
// FastCGI application sent. For every input it checks, and traps on violation:
//   - decoder: consumed stays within the input; kNeedMore consumes everything; kRecord consumes at
//     least one byte; STDOUT/STDERR fragments lie inside the input; fed whole, split at a
//     data-derived point, or a byte at a time, the decoder gives the same stdout, stderr, stream
//     ends, END_REQUEST, GET_VALUES_RESULT pairs, UNKNOWN_TYPE and error;
//   - CGI head parser: the decoded stdout, fed whole or in the fragments the decoder produced, and
//     the raw payload, fed whole or a byte at a time, give the same verdict, head and body offset;
//   - encoders: the payload re-encoded as STDOUT records decodes back to itself; a payload that is
//     a valid name-value sequence re-encoded as PARAMS reads back to the same pairs.
// Built with -fsanitize=fuzzer for fuzzing; linked with tests/fuzz/replay_main.cc to replay the
// corpus in ordinary test runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "handlers/fastcgi/protocol.h"

namespace {

using namespace peregrine::fastcgi;

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

struct Outcome {
  std::string out, err;
  std::vector<std::string> out_fragments;
  int out_ends = 0, err_ends = 0, ends = 0, unknowns = 0;
  uint32_t app_status = 0;
  int protocol_status = -1;
  int unknown_type = -1;
  std::string values;  // name '=' value ';' ...
  DecodeError error = DecodeError::kNone;
  bool same(const Outcome& o) const {
    return out == o.out && err == o.err && out_ends == o.out_ends && err_ends == o.err_ends &&
           ends == o.ends && unknowns == o.unknowns && app_status == o.app_status &&
           protocol_status == o.protocol_status && unknown_type == o.unknown_type &&
           values == o.values && error == o.error;
  }
};

// step 0: cut once at `cut`; otherwise `step` bytes at a time.
Outcome Decode(std::string_view in, uint16_t id, size_t cut, size_t step) {
  Outcome o;
  Decoder dec(id);
  size_t from = 0;
  while (from < in.size() || from == 0) {
    size_t to = step == 0 ? (from < cut ? cut : in.size()) : std::min(in.size(), from + step);
    std::string_view piece = in.substr(from, to - from);
    from = to;
    for (;;) {
      size_t used = 0;
      Record rec;
      const auto st = dec.decode(piece, used, rec);
      FUZZ_CHECK(used <= piece.size());
      if (st == Decoder::Status::kError) {
        FUZZ_CHECK(dec.error() != DecodeError::kNone);
        o.error = dec.error();
        return o;
      }
      if (st == Decoder::Status::kNeedMore) {
        FUZZ_CHECK(used == piece.size());
        break;
      }
      FUZZ_CHECK(used > 0);
      switch (rec.type) {
        case RecordType::kStdout:
        case RecordType::kStderr:
          FUZZ_CHECK(rec.request_id == id);
          if (!rec.data.empty()) {
            FUZZ_CHECK(rec.data.data() >= piece.data() &&
                       rec.data.data() + rec.data.size() <= piece.data() + used);
            FUZZ_CHECK(!rec.end_of_stream);
          } else {
            FUZZ_CHECK(rec.end_of_stream);
          }
          if (rec.type == RecordType::kStdout) {
            o.out += rec.data;
            if (!rec.data.empty()) o.out_fragments.emplace_back(rec.data);
            o.out_ends += rec.end_of_stream;
          } else {
            o.err += rec.data;
            o.err_ends += rec.end_of_stream;
          }
          break;
        case RecordType::kEndRequest:
          FUZZ_CHECK(rec.request_id == id);
          FUZZ_CHECK(dec.at_record_boundary());
          ++o.ends;
          o.app_status = rec.app_status;
          o.protocol_status = static_cast<int>(rec.protocol_status);
          break;
        case RecordType::kGetValuesResult: {
          FUZZ_CHECK(rec.request_id == 0);
          NameValueReader r(rec.data);
          NameValue nv;
          while (r.next(nv)) {
            o.values.append(nv.name).append("=").append(nv.value).append(";");
          }
          FUZZ_CHECK(!r.error());
          break;
        }
        case RecordType::kUnknownType:
          FUZZ_CHECK(rec.request_id == 0);
          ++o.unknowns;
          o.unknown_type = rec.unknown_type;
          break;
        default:
          __builtin_trap();
      }
      piece.remove_prefix(used);
    }
    if (in.empty()) break;
  }
  return o;
}

struct HeadOutcome {
  CgiHeadParser::Status status;
  CgiError error;
  size_t head_bytes;
  std::string summary;
  bool same(const HeadOutcome& o) const {
    return status == o.status && error == o.error && summary == o.summary &&
           (status != CgiHeadParser::Status::kDone || head_bytes == o.head_bytes);
  }
};

HeadOutcome Summarize(const CgiHeadParser& p, CgiHeadParser::Status st, size_t head_bytes) {
  HeadOutcome h{st, p.error(), head_bytes, {}};
  FUZZ_CHECK((st == CgiHeadParser::Status::kError) == (p.error() != CgiError::kNone));
  if (st == CgiHeadParser::Status::kDone) {
    const CgiHead& head = p.head();
    FUZZ_CHECK(head.status >= 100 && head.status <= 599);
    if (!head.has_status && !head.location.empty()) {
      FUZZ_CHECK(head.local_redirect ? head.status == 200 : head.status == 302);
    }
    h.summary = std::to_string(head.status) + "|" + std::string(head.reason) + "|" +
                std::string(head.location) + "|" + std::string(head.content_type) + "|" +
                (head.local_redirect ? "L" : "-") + (head.has_content_type ? "C" : "-");
    for (const auto& x : head.headers) {
      FUZZ_CHECK(!x.name.empty());
      FUZZ_CHECK(x.name.find(':') == std::string_view::npos);
      FUZZ_CHECK(x.value.find('\n') == std::string_view::npos);
      FUZZ_CHECK(x.value.find('\r') == std::string_view::npos);
      FUZZ_CHECK(x.value.find('\0') == std::string_view::npos);
      h.summary.append("|").append(x.name).append(":").append(x.value);
    }
  }
  return h;
}

HeadOutcome ParseHead(const std::vector<std::string_view>& pieces, size_t max_head) {
  CgiHeadParser p(max_head);
  size_t total = 0;
  CgiHeadParser::Status st = CgiHeadParser::Status::kNeedMore;
  for (std::string_view piece : pieces) {
    size_t used = 0;
    st = p.feed(piece, used);
    FUZZ_CHECK(used <= piece.size());
    total += used;
    if (st == CgiHeadParser::Status::kNeedMore) FUZZ_CHECK(used == piece.size());
    if (st != CgiHeadParser::Status::kNeedMore) break;
  }
  if (st == CgiHeadParser::Status::kDone) FUZZ_CHECK(total <= max_head);
  return Summarize(p, st, total);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t opts = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const uint16_t id = (opts & 0x80) ? static_cast<uint16_t>(0x100 | (opts & 0x3)) : (opts & 0x3);
  const size_t cut = in.empty() ? 0 : (static_cast<size_t>(opts) * 131) % (in.size() + 1);
  const size_t max_head = (opts & 0x40) ? 32 + (opts & 0x3f) : CgiHeadParser::kDefaultMaxHead;

  // Decoder: whole, split once, byte by byte (small inputs), in 7-byte steps.
  const Outcome whole = Decode(in, id, in.size(), 0);
  const Outcome split = Decode(in, id, cut, 0);
  FUZZ_CHECK(whole.same(split));
  if (in.size() <= 4096) FUZZ_CHECK(whole.same(Decode(in, id, 0, 1)));
  const Outcome sevens = Decode(in, id, 0, 7);
  FUZZ_CHECK(whole.same(sevens));

  // CGI head over the decoded stdout: whole vs the fragments as the decoder delivered them.
  if (!whole.out.empty()) {
    const HeadOutcome a = ParseHead({whole.out}, max_head);
    std::vector<std::string_view> frags(sevens.out_fragments.begin(), sevens.out_fragments.end());
    FUZZ_CHECK(a.same(ParseHead(frags, max_head)));
  }

  // CGI head over the raw payload: whole, split once, byte by byte.
  {
    const HeadOutcome a = ParseHead({in}, max_head);
    FUZZ_CHECK(a.same(ParseHead({in.substr(0, cut), in.substr(cut)}, max_head)));
    if (in.size() <= 2048) {
      std::vector<std::string_view> bytes;
      for (size_t i = 0; i < in.size(); ++i) bytes.push_back(in.substr(i, 1));
      FUZZ_CHECK(a.same(ParseHead(bytes, max_head)));
    }
  }

  // Encoders: payload as STDOUT records decodes back to itself.
  {
    std::string wire;
    {
      StreamEncoder enc(wire, RecordType::kStdout, id);
      enc.write(in.substr(0, cut));
      enc.write(in.substr(cut));
    }
    FUZZ_CHECK(wire.size() % 8 == 0);
    append_stream_end(wire, RecordType::kStdout, id);
    const Outcome back = Decode(wire, id, wire.size(), 0);
    FUZZ_CHECK(back.error == DecodeError::kNone && back.out == in && back.out_ends == 1);
  }
  // Payload that is a valid name-value sequence survives a PARAMS round trip.
  if (valid_name_values(in)) {
    std::vector<NameValue> pairs;
    NameValueReader r(in);
    NameValue nv;
    while (r.next(nv)) pairs.push_back(nv);
    std::string wire;
    FUZZ_CHECK(append_params(wire, id, pairs));
    // Strip record headers and padding, check the framing.
    std::string content;
    std::string_view w = wire;
    bool ended = false;
    while (!w.empty()) {
      FUZZ_CHECK(!ended && w.size() >= 8 && w[0] == 1 && w[1] == 4);
      const size_t clen = (static_cast<uint8_t>(w[4]) << 8) | static_cast<uint8_t>(w[5]);
      const size_t plen = static_cast<uint8_t>(w[6]);
      FUZZ_CHECK((clen + plen) % 8 == 0 && w.size() >= 8 + clen + plen);
      content.append(w.substr(8, clen));
      ended = clen == 0;
      w.remove_prefix(8 + clen + plen);
    }
    FUZZ_CHECK(ended);
    NameValueReader r2(content);
    size_t i = 0;
    while (r2.next(nv)) {
      FUZZ_CHECK(i < pairs.size() && nv.name == pairs[i].name && nv.value == pairs[i].value);
      ++i;
    }
    FUZZ_CHECK(!r2.error() && i == pairs.size());
  }
  return 0;
}
