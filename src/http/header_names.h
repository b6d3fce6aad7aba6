// The header names a server or gateway manages itself, in one table: the proxy, the FastCGI
// gateway and configuration validation all ask here, so their lists cannot drift apart.
#pragma once

#include <string_view>

namespace peregrine::http {

// Connection-specific fields (RFC 9110 7.6.1) and their legacy relatives: never forwarded from
// one connection to the next. (A Connection header may name more; callers handle those.)
//   Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade,
//   Proxy-Authenticate, Proxy-Authorization
bool is_hop_by_hop(std::string_view name);

// The message framing: Content-Length and Transfer-Encoding. The server frames every message it
// sends, so a gateway drops the back end's framing and lets the connection set its own.
bool is_framing(std::string_view name);

// What the client connection writes into every response itself: the framing, Date and Server.
// A back end's values for these are replaced, as nginx does.
bool is_set_by_connection(std::string_view name);

// Names a route's header rules may not set, add or remove: framing and connection handling
// (Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Content-Length,
// Upgrade). Proxy-Authenticate/-Authorization are hop-by-hop but meant to be set per route
// (credentials for a next-hop proxy), so they are not in this set.
bool is_managed(std::string_view name);

}  // namespace peregrine::http
