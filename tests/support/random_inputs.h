// Deterministic pseudo-random inputs for unit tests of pure parsers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace peregrine::testing {

// Feeds `fn` `count` pseudo-random strings of up to `max_len` bytes drawn from `alphabet`, each in
// an exact-size heap block so a sanitizer build catches any read past its end.
template <typename Fn>
void for_random_inputs(std::string_view alphabet, size_t max_len, int count, Fn fn) {
  uint64_t x = 0x2545F4914F6CDD1Dull;
  for (int iter = 0; iter < count; ++iter) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const size_t len = x % (max_len + 1);
    std::unique_ptr<char[]> buf(new char[len == 0 ? 1 : len]);
    uint64_t y = x;
    for (size_t i = 0; i < len; ++i) {
      y = y * 6364136223846793005ull + 1442695040888963407ull;
      buf[i] = alphabet[(y >> 33) % alphabet.size()];
    }
    fn(std::string_view(buf.get(), len));
  }
}

}  // namespace peregrine::testing
