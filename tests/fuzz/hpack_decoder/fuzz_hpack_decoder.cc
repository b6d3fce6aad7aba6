// libFuzzer target for the HPACK decoder (src/http2/hpack/). The input is a first byte that
// picks the limits (table size, header-list size), then header blocks, each preceded by its
// length in one byte (255, or a length past the end, takes what is left), decoded in order by one
// Decoder as a connection would. Every block that decodes is also re-encoded by our Encoder and
// decoded by a second Decoder: a field that does not come back the same traps. Crashes, sanitizer
// reports and that trap are the findings. Built with -fsanitize=fuzzer for fuzzing, and linked with
// tests/fuzz/replay_main.cc to replay the corpus in ordinary test runs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"

namespace {

using namespace peregrine::http2::hpack;

struct Copied {
  std::string name;
  std::string value;
  bool never_indexed;
  bool operator==(const Copied&) const = default;
};

std::vector<Copied> decode(Decoder& d, std::string_view block, DecodeResult& result) {
  std::vector<Copied> fields;
  result = d.decode(block, [&](const Field& f) {
    fields.push_back({std::string(f.name), std::string(f.value), f.never_indexed});
  });
  return fields;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t table_size = (data[0] & 0x1f) * 256u;
  const size_t list_size = ((data[0] >> 5) + 1) * 2048u;
  Decoder decoder(4096, list_size);
  decoder.set_max_table_size(table_size);
  Encoder encoder;
  Decoder mirror(4096, 1 << 20);
  size_t at = 1;
  while (at < size) {
    size_t length = data[at++];
    if (length == 255 || length > size - at) length = size - at;
    const std::string_view block(reinterpret_cast<const char*>(data + at), length);
    at += length;
    DecodeResult result;
    const std::vector<Copied> fields = decode(decoder, block, result);
    if (result == DecodeResult::kCompressionError) break;  // the connection would end here
    if (result != DecodeResult::kOk) continue;
    std::string reencoded;
    for (const Copied& f : fields) encoder.encode(reencoded, f.name, f.value, f.never_indexed);
    DecodeResult mirrored;
    if (decode(mirror, reencoded, mirrored) != fields || mirrored != DecodeResult::kOk) {
      std::abort();
    }
  }
  return 0;
}
