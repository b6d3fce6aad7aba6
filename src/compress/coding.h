// The content codings we can produce, and their names on the wire (RFC 9110 8.4.1).
#pragma once

#include <cstdint>
#include <string_view>

namespace peregrine::compress {

enum class Coding : uint8_t { kIdentity, kGzip, kBrotli, kZstd };

constexpr std::string_view coding_name(Coding coding) {
  switch (coding) {
    case Coding::kGzip:
      return "gzip";
    case Coding::kBrotli:
      return "br";
    case Coding::kZstd:
      return "zstd";
    case Coding::kIdentity:
      break;
  }
  return "identity";
}

}  // namespace peregrine::compress
