// HTTP/1.x request-head parser (RFC 9112). Pure: bytes in, a verdict out; it never reads a socket.
// Resumable: call parse() again with the same buffer grown by newly received bytes; the parser
// remembers how far it has scanned for the end of the head, so a head arriving one byte at a time
// costs linear time, and the head is parsed only once it is complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "peregrine/request.h"

namespace peregrine::http1 {

enum class ParseStatus : uint8_t { kNeedMore, kDone, kError };

struct ParseResult {
  ParseStatus status = ParseStatus::kNeedMore;
  size_t head_length = 0;         // kDone: bytes of the head, including the final CRLF CRLF
  int error_status = 0;           // kError: 400, 414, 417, 431, 501 or 505
  const char* error_reason = "";  // kError: short text for the error log
};

// 32 bits, as the offsets below: each connection holds a parser, and 10,000 idle connections
// pay for every byte (limits.max_header_bytes is at most 1 MiB).
struct ParserLimits {
  // Request line + headers; beyond: 431 (414 if the line is longer).
  uint32_t max_head_bytes = 16384;
  uint32_t max_target_bytes = 8192;  // beyond: 414
};

class RequestParser {
 public:
  explicit RequestParser(ParserLimits limits = {}) : limits_(limits) {}

  // `buffer` starts at the first byte of the request (after any CRLFs a client may send between
  // pipelined requests, which parse() skips and counts in head_length). On kDone, `out` holds
  // views into `buffer`. Strict per RFC 9112: see parser.cc for each rejected form.
  ParseResult parse(std::string_view buffer, Request& out);

  // Forget scan progress; call before parsing the next request. (parse() also forgets it by
  // itself after returning kDone or kError, so a forgotten reset() is harmless.)
  void reset() {
    scanned_ = 0;
    line_start_ = 0;
    phase_ = Phase::kLeadingLines;
  }

 private:
  // Where the scan for the end of the head stands between calls.
  enum class Phase : uint8_t { kLeadingLines, kRequestLine, kFields };
  ParserLimits limits_;
  uint32_t scanned_ = 0;     // bytes of `buffer` already examined (within max_head_bytes)
  uint32_t line_start_ = 0;  // offset of the request line (after skipped leading CRLFs)
  Phase phase_ = Phase::kLeadingLines;
};

// Decoder for the chunked transfer coding (RFC 9112 section 7.1). Pure and resumable: feed it
// whatever bytes have arrived; it returns how many it consumed and the body bytes among them.
class ChunkedDecoder {
 public:
  enum class Status : uint8_t { kNeedMore, kData, kDone, kError };
  struct Result {
    Status status = Status::kNeedMore;
    size_t consumed = 0;    // bytes of input used by this call
    std::string_view data;  // kData: body bytes (a view into the input)
  };
  // Returns at most one run of body bytes per call; call again with the rest of the input.
  // kDone once the last chunk and the trailer section are consumed; trailers are discarded.
  Result decode(std::string_view input);
  uint64_t body_bytes() const { return body_bytes_; }
  void reset() { *this = ChunkedDecoder(); }

 private:
  enum class State : uint8_t {
    kSize,          // hex digits of chunk-size
    kSizeBws,       // whitespace after the size: only ";" may follow
    kExtStart,      // after ";": optional whitespace, then an extension name
    kExt,           // rest of the extensions, up to CR
    kSizeLf,        // LF ending the size line
    kData,          // chunk-data
    kDataCr,        // CR after chunk-data
    kDataLf,        // LF after chunk-data
    kTrailerStart,  // start of a trailer line, or CR of the final empty line
    kTrailerName,   // field-name of a trailer line
    kTrailerValue,  // field-value up to CR
    kTrailerLf,     // LF ending a trailer line
    kFinalLf,       // LF of the final empty line
    kDone,
    kError,
  };
  State state_ = State::kSize;
  uint64_t chunk_remaining_ = 0;
  uint64_t body_bytes_ = 0;
  uint32_t size_digits_ = 0;
  uint32_t line_bytes_ = 0;  // bytes of the current size line, or of the whole trailer section
};

}  // namespace peregrine::http1
