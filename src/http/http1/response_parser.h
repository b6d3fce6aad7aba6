// HTTP/1.x response parser (RFC 9112), for clients: the load generator and, later, the proxy.
// Pure: bytes in, a verdict out; it never reads a socket. Resumable and streaming:
//
//   parser.start(/*head_request=*/false);
//   r = parser.parse(bytes);    // kNeedMore / kDone / kError, and how many bytes it used
//
// Bytes [0, r.consumed) are used up; the caller keeps [r.consumed, end) and presents them again,
// followed by whatever arrives next. While the head is incomplete nothing is consumed (the
// parser remembers how far it has scanned, so a head arriving a byte at a time costs linear
// time); once the head is complete, body bytes are consumed as they come, so a caller never
// buffers a body. On kDone the bytes after `consumed` belong to the next (pipelined) response:
// call start() and parse them. At end of input call finish(): it completes a body delimited by
// the connection's close, and tells "closed before any byte" apart from "closed mid-response".
//
// Interim 1xx responses (100 Continue, 103 Early Hints) are skipped; 101 is an error (we never
// ask to upgrade). Bodies: none for HEAD, 1xx, 204 and 304; chunked (ChunkedDecoder);
// Content-Length; else delimited by the close of the connection. Transfer-Encoding together
// with Content-Length: Transfer-Encoding wins and the connection must close (RFC 9112 6.3).
// Line ends may be CRLF or a bare LF (RFC 9112 2.2 lets a recipient accept LF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/http1/parser.h"

namespace peregrine::http1 {

enum class BodyFraming : uint8_t {
  kNone,     // HEAD, 1xx, 204, 304: the head is the whole response
  kLength,   // Content-Length
  kChunked,  // Transfer-Encoding ending in chunked
  kClose,    // neither: the body runs until the server closes the connection
};

// A field of the final head as it arrived (value without surrounding whitespace), pointing into
// the bytes given to parse().
struct FieldView {
  std::string_view name;
  std::string_view value;
};

struct ResponseHead {
  int version_minor = 1;  // HTTP/1.<minor>
  int status = 0;
  int64_t content_length = -1;      // -1: absent (or overridden by Transfer-Encoding)
  bool has_content_length = false;  // a Content-Length field was present (even if overridden)
  bool chunked = false;
  bool transfer_encoding = false;      // a Transfer-Encoding field was present
  bool connection_close = false;       // "Connection: close"
  bool connection_keep_alive = false;  // "Connection: keep-alive"
  size_t head_bytes = 0;               // bytes of the final head, status line to the empty line
  size_t interim_bytes = 0;            // bytes of skipped 1xx heads and leading empty lines
  std::string server;                  // the Server field's value, when capture_server is set
};

class ResponseParser {
 public:
  enum class Status : uint8_t { kNeedMore, kDone, kError };
  struct Result {
    Status status = Status::kNeedMore;
    size_t consumed = 0;
  };
  struct Limits {
    size_t max_head_bytes = 65536;  // one head, status line to empty line
    int max_interim = 16;           // 1xx heads before the final one
  };

  ResponseParser() = default;
  explicit ResponseParser(Limits limits) : limits_(limits) {}

  // Prepares for the next response. `head_request`: the request was HEAD (no body follows,
  // whatever Content-Length says). `capture_server`: copy the Server field into head().server.
  void start(bool head_request = false, bool capture_server = false);

  Result parse(std::string_view input);

  // The connection reached end of input. kDone when the body was delimited by the close
  // (the response is now complete); kError otherwise, with started() telling whether any byte
  // of this response had arrived (none: the server closed an idle or reused connection).
  Result finish();

  bool head_complete() const { return phase_ != Phase::kHead; }
  bool started() const { return started_; }
  const ResponseHead& head() const { return head_; }
  BodyFraming framing() const { return framing_; }
  // After kDone: may the connection carry another request? (HTTP/1.1 unless "Connection: close";
  // HTTP/1.0 only with "Connection: keep-alive"; never after a close-delimited body or a
  // response with both Transfer-Encoding and Content-Length.)
  bool keep_alive() const;
  uint64_t body_bytes() const { return body_bytes_; }  // decoded body bytes so far
  uint64_t body_wire_bytes() const {
    return body_wire_bytes_;
  }  // body bytes as sent (chunk framing included)
  const char* error() const { return error_; }
  // When set, each complete final head also leaves its fields in `*fields` (cleared first; obs-fold
  // continuations are left out): a proxy passes them on without splitting the head again. The
  // views are valid as long as the bytes given to parse().
  void collect_fields(std::vector<FieldView>* fields) { fields_ = fields; }

 private:
  enum class Phase : uint8_t { kHead, kBody, kDone, kError };
  Result fail(const char* why, size_t consumed = 0);
  // Parses the complete head in [0, end); returns false (and sets error_) when malformed.
  bool parse_head(std::string_view head);
  bool parse_field(std::string_view name, std::string_view value);

  Limits limits_;
  Phase phase_ = Phase::kHead;
  BodyFraming framing_ = BodyFraming::kNone;
  bool head_request_ = false;
  bool capture_server_ = false;
  bool started_ = false;
  int interim_count_ = 0;
  size_t scanned_ = 0;     // head phase: bytes of the input already examined
  size_t line_start_ = 0;  // head phase: offset of the current line
  size_t head_start_ = 0;  // head phase: offset of the status line (after interims and blank lines)
  uint64_t remaining_ = 0;  // kLength: body bytes still to come
  uint64_t body_bytes_ = 0;
  uint64_t body_wire_bytes_ = 0;
  ChunkedDecoder chunked_;
  ResponseHead head_;
  std::vector<FieldView>* fields_ = nullptr;
  const char* error_ = "";
};

}  // namespace peregrine::http1
