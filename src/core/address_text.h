// Socket addresses as text, for the headers and parameters that carry them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace peregrine {

// Appends the decimal digits of `value` to `out`, returns the new end.
inline char* put_decimal(char* out, unsigned value) {
  char digits[10];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value);
  while (n) *out++ = digits[--n];
  return out;
}

// "1.2.3.4" / "::1" and the port of a socket address, without allocating (inet_ntop formats
// IPv4 through sprintf): proxied and FastCGI requests carry the client's address, and the access
// log writes it. A client of a unix socket listener is "unix:" with no port, as nginx has it.
struct AddressText {
  char ip[INET6_ADDRSTRLEN] = "";
  char port[8] = "";
  size_t ip_length = 0;
  size_t port_length = 0;
  std::string_view ip_view() const { return {ip, ip_length}; }
  std::string_view port_view() const { return {port, port_length}; }

  explicit AddressText(const sockaddr* sa) {
    uint16_t p = 0;
    if (sa && sa->sa_family == AF_INET) {  // by hand: inet_ntop goes through sprintf
      auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      const auto* octets = reinterpret_cast<const uint8_t*>(&in->sin_addr);
      char* end = ip;
      for (int i = 0; i < 4; ++i) {
        if (i) *end++ = '.';
        end = put_decimal(end, octets[i]);
      }
      ip_length = static_cast<size_t>(end - ip);
      p = ntohs(in->sin_port);
    } else if (sa && sa->sa_family == AF_INET6) {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
      ip_length = std::strlen(ip);
      p = ntohs(in6->sin6_port);
    } else if (sa && sa->sa_family == AF_UNIX) {
      std::memcpy(ip, "unix:", 5);
      ip_length = 5;
      return;
    }
    port_length = static_cast<size_t>(put_decimal(port, p) - port);
  }
};

}  // namespace peregrine
