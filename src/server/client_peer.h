// Where a connection keeps the addresses a request's `peer` may point to, and the one function
// both client protocols call before routing to believe a trusted proxy's forwarding header.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include "config/config.h"
#include "peregrine/request.h"

namespace peregrine::server {

// Not a sockaddr_storage: 28 bytes instead of 128 per connection (unix peers keep the family).
union PeerAddress {
  sockaddr sa;
  sockaddr_in v4;
  sockaddr_in6 v6;
};

// When [client_address] trusts request.peer, points request.peer at the client its header
// names (written into *storage). The caller checks `trusted_proxies.empty()` first, so servers
// that trust no one pay one branch.
void use_forwarded_client(Request& request, const config::ClientAddress& policy,
                          PeerAddress* storage);

}  // namespace peregrine::server
