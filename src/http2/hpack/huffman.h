// The HPACK Huffman code (RFC 7541 5.2, Appendix B). The encoder packs codes through a 64-bit
// accumulator; the decoder walks the code tree four bits at a time with a table generated at
// compile time from the code list below, so a decoded byte costs two table lookups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace peregrine::http2::hpack {

struct HuffmanCode {
  uint32_t code;  // right-aligned
  uint8_t bits;
};

// RFC 7541 Appendix B, transcribed: the code of each byte value, then EOS (256).
extern const HuffmanCode kHuffmanCodes[257];

// Bytes the Huffman encoding of `text` takes (the last one padded with ones).
size_t huffman_encoded_size(std::string_view text);

// Writes exactly huffman_encoded_size(text) bytes at `out`.
void huffman_encode(std::string_view text, char* out);

// The most bytes `size` encoded bytes can decode to: the shortest code has 5 bits.
constexpr size_t huffman_max_decoded_size(size_t size) {
  return size * 8 / 5;
}

// Decodes `size` bytes into `out`, which has room for huffman_max_decoded_size(size) bytes, and
// stores the decoded length. False when the input holds EOS, or ends in padding longer than 7
// bits or not made of ones (RFC 7541 5.2): a decoding error.
bool huffman_decode(const uint8_t* in, size_t size, char* out, size_t* decoded_size);

}  // namespace peregrine::http2::hpack
