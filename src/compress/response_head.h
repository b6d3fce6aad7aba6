// Reading and rewriting a Response's head for compression. A Response keeps its headers as
// "Name: value\r\n" text (the handler's prebuilt lines and its added ones), so this reads them
// in one pass and, when the body gets compressed, rebuilds them: Content-Encoding added, Vary
// extended, a strong ETag weakened (the bytes differ from the identity representation's),
// Content-Length and Accept-Ranges dropped (the length changes; ranges of an encoded body are
// not offered).
#pragma once

#include <string>
#include <string_view>

#include "compress/coding.h"
#include "compress/decision.h"
#include "peregrine/request.h"
#include "peregrine/response.h"

namespace peregrine::compress {

// The response headers the decision reads, and whether Vary already names Accept-Encoding.
struct HeadFacts {
  ResponseFacts facts;
  bool vary_accept_encoding = false;  // Vary already lists Accept-Encoding (or is "*")
  bool flush_each_write = false;      // X-Accel-Buffering: no, or text/event-stream
};
HeadFacts read_head(const Request& request, const Response& response, int64_t length);

// The request's Accept-Encoding, if any, and whether it carries Range.
struct RequestFacts {
  bool has_accept_encoding = false;
  std::string_view accept_encoding;
  bool range = false;
};
RequestFacts read_request(const Request& request);

// Adds "Vary: Accept-Encoding" (or extends the handler's Vary) without touching anything else.
void add_vary(Response& response, const HeadFacts& head);

// Rebuilds the head for a body in `coding`, keeping the status, the close flag and every other
// header; the body is emptied (the caller appends the encoded bytes).
void rewrite_for_coding(Response& response, Coding coding, const HeadFacts& head);

}  // namespace peregrine::compress
