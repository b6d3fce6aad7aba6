// The pure parts of HTTP/2 message handling (RFC 9113 8.2, 8.3): turning a stream's header
// fields into the protocol-neutral peregrine::Request, and a Response's "Name: value\r\n" lines
// into the lower-case field list HTTP/2 sends. No nghttp2 and no socket here, so they are tested
// on their own (tests/unit/http2/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/request.h"

namespace peregrine::http2 {

Method method_from_text(std::string_view text);

// Connection-specific fields (RFC 9113 8.2.2) that an HTTP/1 message may carry and an HTTP/2
// one must not: Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, TE, and
// HTTP2-Settings (RFC 7540 3.2.1: it only ever belonged to an HTTP/1.1 Upgrade).
bool is_connection_specific(std::string_view name);

// The checks a request's pseudo-headers pass before the request is handed on. Each value ends up
// in an HTTP/1.1 request line or Host field when the request is proxied, so anything HTTP/1.1
// would read differently (a space, a tab, a control byte, a '/' or '@' in a host) is refused here
// rather than passed on for a back end to misread (issue 49).
// RFC 9110 9.1: a method is a token.
bool valid_method(std::string_view method);
// RFC 9113 8.3.1 / RFC 9112 3.2.1: origin-form, '/' then visible ASCII (0x21-0x7E) without '#'.
bool valid_origin_path(std::string_view path);
// RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool valid_scheme(std::string_view scheme);
// uri-host [ ":" port ] (RFC 3986 3.2.2-3.2.3): an IP-literal or a reg-name/IPv4 address, no
// userinfo; the port at most 65535, required when `require_port` (CONNECT). The rule the HTTP/1
// parser applies to Host (ValidHostPort in http/http1/parser.cc), on a string_view. Not shared
// with it: the parser's scans its Host without bounds checks, relying on the byte after the
// range (CR or OWS in a request head), which an HTTP/2 field's view does not have.
bool valid_authority(std::string_view authority, bool require_port);

// One stream's request head, collected field by field as HPACK decodes it. The fields are copied
// into storage the builder owns, so the Request's views stay valid until reset() (the stream
// keeps its builder as long as an exchange runs).
class RequestHeadBuilder {
 public:
  void reset();
  // Adds a decoded field whose characters the session has checked (RFC 9113 8.2.1, upper case
  // and connection-specific fields included). Returns false when the field makes the request
  // malformed (an unknown or repeated pseudo-header, a pseudo-header after a regular field):
  // the stream is refused. Fields beyond the limits are not kept; finish() then reports 431.
  bool add(std::string_view name, std::string_view value);
  // Bytes of names and values received so far (32 per field, as RFC 9113 6.5.2 counts them).
  size_t list_bytes() const { return list_bytes_; }
  void set_max_list_bytes(size_t bytes) { max_list_bytes_ = bytes; }

  // Fills `request` (cleared first): method, target, path and query from :path, host from
  // :authority, cookies joined with "; " (RFC 9113 8.2.3), the content length. The header list
  // carries exactly one host field, the authority routed on: :authority's value when it was
  // sent (a `host` field that names the same authority is folded into it, one that names
  // another is refused: RFC 9113 8.3.1), else the client's single `host`. `end_stream` says the
  // HEADERS ended the stream: no body. Returns 0, or the status to answer: 400 (missing or
  // malformed pseudo-headers, a host that disagrees with :authority, a bad content-length) or
  // 431 (over the field count or byte limit).
  int finish(Request& request, bool end_stream);

 private:
  struct Span {
    uint32_t at = 0;
    uint32_t length = 0;
  };
  struct Field {
    Span name;
    Span value;
  };
  std::string_view view(Span s) const { return {storage_.data() + s.at, s.length}; }
  Span keep(std::string_view bytes);

  std::string storage_;
  std::vector<Field> fields_;
  std::vector<Span> cookies_;
  Span method_, scheme_, path_, authority_;
  bool has_method_ = false, has_scheme_ = false, has_path_ = false, has_authority_ = false;
  bool regular_seen_ = false;
  bool too_large_ = false;
  size_t list_bytes_ = 0;
  size_t max_list_bytes_ = 16384;
};

// A response's header fields as HTTP/2 sends them: names lower-cased, connection-specific
// fields dropped. Storage is reused from one response to the next.
class ResponseFields {
 public:
  void clear();
  void add(std::string_view name, std::string_view value);
  // "Name: value\r\n" lines (Response::extra_headers, prebuilt_headers, the Date/Server lines).
  void add_lines(std::string_view lines);
  size_t size() const { return fields_.size(); }
  std::string_view name(size_t i) const {
    return {storage_.data() + fields_[i].name_at, fields_[i].name_length};
  }
  std::string_view value(size_t i) const {
    return {storage_.data() + fields_[i].value_at, fields_[i].value_length};
  }

 private:
  struct Field {
    uint32_t name_at, name_length, value_at, value_length;
  };
  std::string storage_;
  std::vector<Field> fields_;
};

}  // namespace peregrine::http2
