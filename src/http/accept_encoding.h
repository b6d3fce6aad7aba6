// Accept-Encoding (RFC 9110 12.5.3). Pure, allocation-free.
#pragma once

#include <string_view>

namespace peregrine::http {

struct AcceptedEncodings {
  bool br = false;
  bool gzip = false;
};

// Which of the codings we can serve pre-compressed the client accepts.
//  - Coding names are case-insensitive; "x-gzip" is gzip (RFC 9110 8.4.1.3).
//  - A weight "q=" (case-insensitive, RFC qvalue syntax: 0, 0.xxx, 1, 1.000) of 0 means "not
//    acceptable"; any other valid weight means acceptable. An element whose weight is malformed
//    is ignored. Other parameters are skipped.
//  - "*" applies to codings not listed by name. If a coding is listed more than once the highest
//    weight wins.
//  - Spaces/tabs around elements, ';' and '=' are tolerated; empty elements are skipped.
// An empty value means "no coding" (RFC 9110): both false. A missing header is the caller's case;
// calling this with "" gives the conservative answer (identity only).
AcceptedEncodings parse_accept_encoding(std::string_view value);

// The weight (in thousandths, 0..1000) the client gives each coding we can produce, by the same
// rules; -1 where the coding is neither listed nor covered by "*". `identity` is its weight when
// listed by name, 0 when "*;q=0" excludes it, else -1: acceptable by default (RFC 9110 12.5.3)
// but never preferred to a coding the client listed.
struct CodingWeights {
  int gzip = -1;
  int br = -1;
  int zstd = -1;
  int identity = -1;
};
CodingWeights parse_coding_weights(std::string_view value);

}  // namespace peregrine::http
