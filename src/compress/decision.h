// Whether a response gets compressed, and with which coding: pure functions of the request's and
// the response's headers and the route's options, so every client protocol and every handler
// (static files, FastCGI, proxy, return, application) decides the same way.
#pragma once

#include <cstdint>
#include <string_view>

#include "compress/coding.h"
#include "compress/options.h"

namespace peregrine::compress {

// The coding for a client's Accept-Encoding value (nullptr: no header, identity only): the one
// with the highest weight among those the options list; equal weights go by the options' order.
// kIdentity when none is acceptable (also when the client refused identity: we send it anyway,
// as nginx does, rather than a 406 nobody expects).
Coding negotiate(const std::string_view* accept_encoding, const Options& options);

// True when `type` (a Content-Type value; parameters ignored, case-insensitive) is in `types`;
// "text/*" matches every text/ type.
bool media_type_listed(std::string_view type, const Options& options);

// What the decision needs to know about a response.
struct ResponseFacts {
  bool head_request = false;
  bool range_request = false;  // the request carried Range
  int status = 200;
  bool has_content_encoding = false;  // already encoded (even "identity": leave it alone)
  bool no_transform = false;          // Cache-Control: no-transform
  std::string_view content_type;      // empty when missing
  int64_t length = -1;                // body length; < 0 unknown (streamed)
};

enum class Verdict : uint8_t {
  kNever,     // not a candidate: as it is, no Vary
  kIdentity,  // a candidate the client gets uncompressed: add Vary: Accept-Encoding
  kCompress,  // compress it with the negotiated coding (and add Vary)
};

// `coding` is negotiate()'s answer for this request.
Verdict decide(const ResponseFacts& facts, const Options& options, Coding coding);

}  // namespace peregrine::compress
