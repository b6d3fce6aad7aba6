// Listen addresses as written in the configuration and on the command line:
//   "127.0.0.1:8080"  "[::1]:8080"  "*:80" or ":80" (0.0.0.0)  "80" (0.0.0.0)  "localhost:80"
//   "unix:/run/peregrine.sock"
// Port 0 asks the kernel for an ephemeral port. (The parsing itself is shared with upstream
// addresses: config/address.h.) Host names other than "localhost" are not
// resolved: a server should not depend on DNS to start.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "config/config.h"

namespace peregrine::config {

// Fills out->addr, out->addr_len and out->text (= text). On failure returns false and sets
// *error (and *hint, possibly empty). Leaves out->backlog and out->pos alone.
bool parse_listen_address(std::string_view text, ListenAddress* out, std::string* error,
                          std::string* hint);

// The port in host byte order (0 for families other than AF_INET/AF_INET6).
uint16_t endpoint_port(const sockaddr_storage& addr);

// True when both name the same family, address and port (or the same unix socket path).
bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b);

// "127.0.0.1:8080", "[::1]:8080": the canonical numeric form (e.g. for logs after binding
// port 0). Returns "" for families other than AF_INET/AF_INET6.
std::string format_endpoint(const sockaddr_storage& addr);

}  // namespace peregrine::config
