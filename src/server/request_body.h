// An HTTP/1.1 request body as it comes off the wire: framed by Content-Length or chunked
// (RFC 9112 6), de-chunked, and held to max_body_bytes. The one reader of request bodies: the
// connection feeds its output to a handler's buffer, to nowhere (a body nobody reads is still
// read, to find the next request), or to an asynchronous handler's exchange. Pure: bytes in,
// body bytes out; it never touches a socket.
#pragma once

#include <cstdint>
#include <string_view>

#include "http/http1/parser.h"
#include "peregrine/request.h"

namespace peregrine::server {

class RequestBody {
 public:
  // A piece of the body taken from the front of the input.
  struct Piece {
    size_t consumed = 0;    // bytes of input used (framing included); 0 with no error: need more
    std::string_view data;  // body bytes, a view into the input; may be empty
    bool last = false;      // the body is complete with this piece
    int error = 0;          // 400: malformed chunked framing; 413: more than the limit
  };

  // Starts reading the body `request` announces; a request without a body is done at once.
  void start(const Request& request, uint64_t limit);
  // Takes the next piece from `input`: at most one run of body bytes.
  Piece next(std::string_view input);
  bool done() const { return done_; }
  uint64_t received() const { return received_; }

 private:
  http1::ChunkedDecoder chunks_;
  uint64_t remaining_ = 0;  // Content-Length bodies
  uint64_t received_ = 0;
  uint64_t limit_ = 0;
  bool chunked_ = false;
  bool done_ = true;
};

}  // namespace peregrine::server
