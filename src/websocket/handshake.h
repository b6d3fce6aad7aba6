// RFC 6455 section 4.2: the server's side of the opening handshake. Pure: a parsed request in,
// the answer to send out (101 with its headers, or the refusal). The connection that switches
// protocols writes the answer and then hands its socket to a Session (session.h).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peregrine/request.h"

namespace peregrine::websocket {

struct HandshakeAnswer {
  // 101 when the upgrade is accepted; 426 when the request is no WebSocket upgrade or asks for
  // another protocol version; 400 when it is a malformed one.
  int status = 101;
  std::string_view error;  // for the error log, empty on 101
  // Response headers, besides the Date/Server/Content-Length the server adds: on 101 Upgrade,
  // Connection and Sec-WebSocket-Accept (+ Sec-WebSocket-Protocol once one is selected); on 426
  // the Upgrade and Sec-WebSocket-Version the client should use.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Checks an upgrade request: GET, HTTP/1.1, `Upgrade: websocket`, `Connection` listing upgrade,
// `Sec-WebSocket-Version: 13`, a `Sec-WebSocket-Key` of 16 base64-encoded bytes.
HandshakeAnswer check_upgrade(const Request& request);

// base64(SHA-1(key + the RFC's GUID)): the Sec-WebSocket-Accept for a Sec-WebSocket-Key.
std::string accept_key(std::string_view key);

// The first subprotocol of the client's Sec-WebSocket-Protocol list (its order of preference)
// that `supported` holds, compared exactly; empty when none is (the 101 then names none, and the
// client decides whether to go on).
std::string_view select_subprotocol(const Request& request,
                                    std::span<const std::string_view> supported);

// Adds Sec-WebSocket-Protocol to an accepted answer.
void set_subprotocol(HandshakeAnswer& answer, std::string_view protocol);

// Adds Sec-WebSocket-Extensions to an accepted answer: the value negotiate_permessage_deflate
// (deflate.h) produced; nothing when it is empty.
void set_extensions(HandshakeAnswer& answer, std::string_view value);

// The whole 101 response head (status line, headers, blank line), for a connection that writes
// the switch itself.
std::string response_head(const HandshakeAnswer& answer);

}  // namespace peregrine::websocket
