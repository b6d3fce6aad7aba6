// libFuzzer target for the AJP13 response decoder (handlers/ajp/protocol.h, ResponseReader).
//
// Input: byte 0 picks the packet size (8 KiB, 16 KiB or 64 KiB) and a split step, the rest is
// what a container sent. For every input it checks, and traps on violation:
//   - next() consumes only from the front of its input, never more than it was given, and
//     kNeedMore consumes everything;
//   - body data and header views lie inside the input or the reader's own buffer, and a body
//     chunk is never larger than a packet;
//   - fed whole, at a data-derived split step, or a byte at a time, the reader gives the same
//     events (head, headers, body bytes, GET_BODY_CHUNK sizes, END and its reuse flag, CPONG)
//     and the same error;
//   - after kError every later call reports kError again.
// Built with -fsanitize=fuzzer for fuzzing; linked with tests/fuzz/replay_main.cc to replay the
// corpus in ordinary test runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "handlers/ajp/protocol.h"

namespace {

using peregrine::ajp::ResponseReader;

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

// Every event, flattened to text: equal for every way of feeding the same bytes.
std::string Decode(std::string_view in, size_t packet_size, size_t step) {
  ResponseReader reader(packet_size);
  std::string log;
  size_t at = 0;
  bool failed = false;
  while (at < in.size() && !failed) {
    size_t n = step == 0 ? in.size() - at : std::min(step, in.size() - at);
    std::string_view input = in.substr(at, n);
    at += n;
    for (;;) {
      const size_t before = input.size();
      const char* front = input.data();
      std::string_view data;
      ResponseReader::Event e = reader.next(input, data);
      FUZZ_CHECK(input.size() <= before);
      FUZZ_CHECK(input.empty() || input.data() == front + (before - input.size()));
      if (e == ResponseReader::Event::kNeedMore) {
        FUZZ_CHECK(input.empty());
        break;
      }
      if (e == ResponseReader::Event::kError) {
        log += "E:" + reader.error();
        std::string_view more = "AB";
        FUZZ_CHECK(reader.next(more, data) == ResponseReader::Event::kError);
        failed = true;
        break;
      }
      if (e == ResponseReader::Event::kHead) {
        log += "H" + std::to_string(reader.status());
        for (const auto& h : reader.headers()) {
          log += "|" + std::string(h.name) + "=" + std::string(h.value);
        }
        log += ";";
      } else if (e == ResponseReader::Event::kBody) {
        FUZZ_CHECK(data.size() <= packet_size);
        FUZZ_CHECK(reader.head_done());
        log += "B" + std::string(data) + ";";
      } else if (e == ResponseReader::Event::kGetBody) {
        log += "G" + std::to_string(reader.requested()) + ";";
      } else if (e == ResponseReader::Event::kEnd) {
        FUZZ_CHECK(reader.ended());
        log += reader.reuse() ? "R1;" : "R0;";
      } else if (e == ResponseReader::Event::kCpong) {
        log += "P;";
      }
    }
  }
  return log;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t options = data[0];
  static constexpr size_t kSizes[] = {8192, 16384, 65536, 8192};
  const size_t packet_size = kSizes[options & 3];
  const size_t step = 2 + (options >> 2);
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string whole = Decode(in, packet_size, 0);
  FUZZ_CHECK(Decode(in, packet_size, 1) == whole);
  FUZZ_CHECK(Decode(in, packet_size, step) == whole);
  return 0;
}
