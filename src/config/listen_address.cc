#include "config/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>

#include "config/address.h"

namespace peregrine::config {

bool parse_listen_address(std::string_view text, ListenAddress* out, std::string* error,
                          std::string* hint) {
  SocketAddress parsed;
  if (!parse_socket_address(text, AddressRole::kListen, &parsed, error, hint)) return false;
  out->addr = parsed.addr;
  out->addr_len = parsed.len;
  out->text = std::string(text);
  return true;
}

uint16_t endpoint_port(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return 0;
}

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(in6_addr)) == 0;
  }
  if (a.ss_family == AF_UNIX) {
    return std::strcmp(reinterpret_cast<const sockaddr_un&>(a).sun_path,
                       reinterpret_cast<const sockaddr_un&>(b).sun_path) == 0;
  }
  return false;
}

std::string format_endpoint(const sockaddr_storage& addr) {
  char buffer[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& sin = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &sin.sin_addr, buffer, sizeof buffer);
    return std::string(buffer) + ":" + std::to_string(ntohs(sin.sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &sin6.sin6_addr, buffer, sizeof buffer);
    return "[" + std::string(buffer) + "]:" + std::to_string(ntohs(sin6.sin6_port));
  }
  return "";
}

}  // namespace peregrine::config
