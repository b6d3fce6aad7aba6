// Decoders for the unit tests' round trips: what a client would do with our output.
#pragma once

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include <optional>
#include <string>
#include <string_view>

#include "compress/coding.h"

namespace peregrine::compress::test_support {

inline std::optional<std::string> gunzip(std::string_view in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return std::nullopt;
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  char buf[16384];
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

// Decodes a gzip stream that has been flushed but not finished (what a client has so far).
inline std::string gunzip_partial(std::string_view in) {
  z_stream z{};
  inflateInit2(&z, 15 + 16);
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[16384];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (rc != Z_OK || z.avail_in == 0) break;
  }
  inflateEnd(&z);
  return out;
}

inline std::optional<std::string> unbrotli(std::string_view in) {
  BrotliDecoderState* s = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  std::string out;
  size_t avail_in = in.size();
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(in.data());
  BrotliDecoderResult rc;
  do {
    uint8_t buf[16384];
    size_t avail_out = sizeof buf;
    uint8_t* next_out = buf;
    rc = BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    out.append(reinterpret_cast<char*>(buf), sizeof buf - avail_out);
  } while (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT);
  BrotliDecoderDestroyInstance(s);
  if (rc != BROTLI_DECODER_RESULT_SUCCESS) return std::nullopt;
  return out;
}

inline std::optional<std::string> unzstd(std::string_view in) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  std::string out;
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  size_t rc = 1;
  while (input.pos < input.size) {
    char buf[16384];
    ZSTD_outBuffer output{buf, sizeof buf, 0};
    rc = ZSTD_decompressStream(d, &output, &input);
    if (ZSTD_isError(rc)) break;
    out.append(buf, output.pos);
  }
  // Drain what is still buffered.
  while (!ZSTD_isError(rc) && rc != 0) {
    char buf[16384];
    ZSTD_outBuffer output{buf, sizeof buf, 0};
    rc = ZSTD_decompressStream(d, &output, &input);
    if (ZSTD_isError(rc) || output.pos == 0) break;
    out.append(buf, output.pos);
  }
  ZSTD_freeDCtx(d);
  if (ZSTD_isError(rc) || rc != 0) return std::nullopt;
  return out;
}

inline std::optional<std::string> decode(Coding coding, std::string_view in) {
  switch (coding) {
    case Coding::kGzip:
      return gunzip(in);
    case Coding::kBrotli:
      return unbrotli(in);
    case Coding::kZstd:
      return unzstd(in);
    case Coding::kIdentity:
      break;
  }
  return std::string(in);
}

// Text that compresses like a web page: repeated markup with varying words.
inline std::string page_like(size_t size) {
  std::string out;
  unsigned seed = 7;
  while (out.size() < size) {
    seed = seed * 1103515245 + 12345;
    out += "<div class=\"post-" + std::to_string((seed >> 16) % 97) + "\"><a href=\"/2024/" +
           std::to_string((seed >> 8) % 13) + "/\">Entry " + std::to_string(seed % 1000) +
           "</a></div>\n";
  }
  out.resize(size);
  return out;
}

}  // namespace peregrine::compress::test_support
