// The body half of the proxy's response codec: after http1::ResponseParser has the head, the body
// by its framing (none, Content-Length, chunked, or until the connection closes) becomes pieces
// and an end. Pure: bytes in, events out, no socket, so the codec is tested on its own
// (tests/unit/handlers/proxy/response_codec_test.cc); ProxyExchange::pump_body() drives it.
#pragma once

#include <cstdint>
#include <string_view>

#include "http/http1/parser.h"
#include "http/http1/response_parser.h"

namespace peregrine::proxy {

class BodyReader {
 public:
  enum class Event : uint8_t {
    kNeedMore,  // every byte of `input` was used: feed more (kClose: until the end of input)
    kData,      // `data` is a piece of the body (a view into `input`), never empty
    kEnd,       // the body is complete; bytes after it are left in `input`
    kError,     // a malformed chunked body
  };

  // A new body, framed as the head said; `length` is its Content-Length (kLength).
  void start(http1::BodyFraming framing, uint64_t length) {
    framing_ = framing;
    remaining_ = framing == http1::BodyFraming::kLength ? length : 0;
    chunked_.reset();
  }

  // Consumes what it reports from the front of `input`.
  Event next(std::string_view& input, std::string_view& data);

  http1::BodyFraming framing() const { return framing_; }

 private:
  http1::BodyFraming framing_ = http1::BodyFraming::kNone;
  uint64_t remaining_ = 0;  // kLength: body bytes still to come
  http1::ChunkedDecoder chunked_;
};

}  // namespace peregrine::proxy
