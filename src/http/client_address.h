// The real client address behind trusted proxies: X-Forwarded-For and RFC 7239 Forwarded.
// Pure: headers and networks in, an address out; the connection decides when to ask (only when
// its peer is a trusted proxy) and where the result lives.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <span>
#include <string_view>

#include "core/cidr.h"
#include "peregrine/request.h"

namespace peregrine::http {

enum class ForwardedHeader : uint8_t { kXForwardedFor, kForwarded };

bool in_any(std::span<const Cidr> networks, const sockaddr* address);

// The hops of every `which` header, in order (several header lines are one list), walked from
// the right: trusted proxies are skipped, the first untrusted hop is the client. When every
// hop is trusted the left-most one is the client. A hop that is not an address (Forwarded's
// "unknown" and "_obfuscated" identifiers, or garbage) stops the walk: the client is then the
// hop to its right, or the peer itself when there is none. Returns false (keep the peer) when
// no header names an address that way; never fails otherwise.
bool forwarded_client(std::span<const Header> headers, ForwardedHeader which,
                      std::span<const Cidr> trusted, sockaddr_storage* out, socklen_t* out_len);

// One node of either header: "192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]:80"
// (Forwarded's quotes already removed). False when it is no address.
bool parse_node(std::string_view text, sockaddr_storage* out, socklen_t* out_len);

}  // namespace peregrine::http
