// What a site or route says about on-the-fly compression. Plain data, read by compress/config.cc
// and inherited from a [[site]] by its routes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compress/coding.h"

namespace peregrine::compress {

struct Options {
  bool enabled = false;
  // Media types compressed ("text/*" matches every text type); parameters are ignored.
  std::vector<std::string> types{"text/*",
                                 "application/javascript",
                                 "application/x-javascript",
                                 "application/json",
                                 "application/ld+json",
                                 "application/manifest+json",
                                 "application/xml",
                                 "application/xhtml+xml",
                                 "application/rss+xml",
                                 "application/atom+xml",
                                 "image/svg+xml",
                                 "application/wasm"};
  uint64_t min_length = 256;  // bodies known to be shorter are sent as they are
  int gzip_level = 6;         // 1..9
  int brotli_level = 4;       // 0..11
  int zstd_level = 3;         // 1..19
  // The server's preference when the client weighs several codings equally.
  std::vector<Coding> order{Coding::kBrotli, Coding::kZstd, Coding::kGzip};

  int level_for(Coding coding) const {
    switch (coding) {
      case Coding::kGzip:
        return gzip_level;
      case Coding::kBrotli:
        return brotli_level;
      case Coding::kZstd:
        return zstd_level;
      case Coding::kIdentity:
        break;
    }
    return 0;
  }
};

}  // namespace peregrine::compress
