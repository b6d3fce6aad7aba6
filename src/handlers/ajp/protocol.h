// AJP13 (Apache JServ Protocol 1.3, as Tomcat's AJP connector speaks it): the pure codec, bytes
// in and bytes out, no socket. The web server writes packets that start with 0x12 0x34 and a
// 16-bit length; the container answers with packets that start with "AB". A packet (its 4-byte
// header included) never exceeds the connector's packetSize (8 KiB by default, up to 64 KiB);
// ajp_packet_size must match it on both sides.
//
// One request on a connection:
//   -> FORWARD_REQUEST (method, URI, client address, server name/port, is_ssl, headers,
//      attributes, the secret)
//   -> the first body packet right behind it, when Content-Length > 0
//   <- GET_BODY_CHUNK n   -> a body packet of at most n bytes (an empty one: the body ended)
//   <- SEND_HEADERS, SEND_BODY_CHUNK..., END_RESPONSE (reuse flag)
// CPING (0x0A) is answered by CPONG (0x09) on an idle connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/request.h"

namespace peregrine::ajp {

inline constexpr size_t kDefaultPacketSize = 8192;
inline constexpr size_t kMinPacketSize = 8192;
inline constexpr size_t kMaxPacketSize = 65536;
// 0x12 0x34 + length; a body packet adds its own 16-bit data length.
inline constexpr size_t kPacketHeader = 4;
inline constexpr size_t kBodyHeader = 6;

// The most body bytes one packet of `packet_size` carries.
constexpr size_t max_body_chunk(size_t packet_size) {
  return packet_size - kBodyHeader;
}

// The method code of FORWARD_REQUEST, or 0xFF (SC_M_JK_STORED: the name goes as the
// req_method attribute) for a method without one, such as PATCH.
uint8_t method_code(std::string_view method);

// Everything FORWARD_REQUEST carries. Views: the caller keeps them alive while encoding.
struct ForwardRequest {
  std::string_view method;       // "GET", "PATCH" ...
  std::string_view protocol;     // "HTTP/1.1"
  std::string_view uri;          // the path as the client sent it, still percent-encoded
  std::string_view query;        // without '?'; empty: no query_string attribute
  std::string_view remote_addr;  // the client's address
  std::string_view remote_port;  // sent as the AJP_REMOTE_PORT request attribute
  std::string_view server_name;  // the Host's name (Tomcat prefers the Host header anyway)
  uint16_t server_port = 0;      // the port the client connected to
  bool is_ssl = false;
  std::span<const Header> headers;
  bool drop_content_length = false;  // chunked: Transfer-Encoding wins (CVE-2022-26377)
  std::string_view remote_user;      // attributes; empty ones are not sent
  std::string_view auth_type;
  std::string_view route;
  // The client's TLS session, as mod_jk sends mod_ssl's: Tomcat makes them the attributes
  // jakarta.servlet.request.X509Certificate (from the PEM), .cipher_suite, .ssl_session_id,
  // .key_size, and org.apache.tomcat.util.net.secure_protocol_version (from the
  // AJP_SSL_PROTOCOL request attribute).
  std::string_view ssl_cert;  // PEM
  std::string_view ssl_cipher;
  std::string_view ssl_session;  // hex
  int ssl_key_size = -1;         // < 0: not sent
  std::string_view ssl_protocol;
  std::string_view secret;
};

// Appends the FORWARD_REQUEST packet to `out`. False (nothing appended, *error says why) when
// it does not fit in `packet_size` or a field is too long for AJP's 16-bit lengths.
bool encode_forward_request(const ForwardRequest& request, size_t packet_size, std::string& out,
                            std::string* error);

// Appends one request-body packet with `data` (at most max_body_chunk(packet_size) bytes; an
// empty one says the body ended).
void append_body_packet(std::string& out, std::string_view data);

// The CPING packet (5 bytes).
std::string_view cping_packet();

struct ResponseHeader {
  std::string_view name;
  std::string_view value;
};

// The container's packets, decoded one event at a time. Views it returns (data, headers) are
// valid until the next call to next() or reset().
class ResponseReader {
 public:
  enum class Event : uint8_t {
    kNeedMore,  // `input` is consumed: give more bytes
    kHead,      // SEND_HEADERS: status(), headers()
    kBody,      // SEND_BODY_CHUNK: `data`
    kGetBody,   // GET_BODY_CHUNK: requested() bytes wanted
    kEnd,       // END_RESPONSE: reuse()
    kCpong,     // CPONG_REPLY
    kError,     // error() says what; the connection cannot be used any more
  };

  explicit ResponseReader(size_t packet_size = kDefaultPacketSize) : packet_size_(packet_size) {}

  // Consumes bytes from the front of `input`.
  Event next(std::string_view& input, std::string_view& data);
  void reset();

  bool head_done() const { return head_done_; }
  bool ended() const { return ended_; }
  int status() const { return status_; }
  std::string_view reason() const { return reason_; }
  const std::vector<ResponseHeader>& headers() const { return headers_; }
  size_t requested() const { return requested_; }
  bool reuse() const { return reuse_; }
  const std::string& error() const { return error_; }

 private:
  Event fail(std::string message);
  Event decode(std::string_view payload, std::string_view& data);
  Event decode_headers(std::string_view payload);

  size_t packet_size_;
  std::string partial_;  // a packet split across reads, header included
  bool head_done_ = false;
  bool ended_ = false;
  bool failed_ = false;
  int status_ = 0;
  std::string_view reason_;
  std::vector<ResponseHeader> headers_;
  size_t requested_ = 0;
  bool reuse_ = false;
  std::string error_;
};

}  // namespace peregrine::ajp
