// The one parser behind listen addresses (listen_address.h) and back-end addresses
// (upstream_address.h): "IPv4:port", "[IPv6]:port", "localhost:port" and "unix:/path", with the
// rules that differ between a place to listen on and a place to connect to passed as a Role.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace peregrine::config {

enum class AddressRole {
  kListen,    // port 0 = any free port; "*", ":80", "80", 0.0.0.0 and [::] = every interface
  kUpstream,  // a real port and a real host
};

// An endpoint as parsed: what the kernel needs to bind or connect.
struct SocketAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// Spaces, controls or DEL: never part of an address or URL we accept.
bool has_space_or_control(std::string_view text);

// "0".."65535" (no sign, no spaces, at most five digits); 0 only when `zero_ok`.
bool parse_port(std::string_view text, bool zero_ok, uint16_t* port);

// Parses `text` in the forms `role` accepts ("unix:" paths included). On failure returns false
// with *error and *hint (possibly empty) set, naming `text` as a "<role> address".
bool parse_socket_address(std::string_view text, AddressRole role, SocketAddress* out,
                          std::string* error, std::string* hint);

}  // namespace peregrine::config
