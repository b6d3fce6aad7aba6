#include "config/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace peregrine::config {

namespace {

bool parse_port(std::string_view text, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

void set_ipv4(ListenAddress* out, const in_addr& ip, uint16_t port) {
  out->addr = sockaddr_storage{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&out->addr);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  sin->sin_addr = ip;
  out->addr_len = sizeof(sockaddr_in);
}

constexpr std::string_view kForms =
    "valid forms: \"127.0.0.1:8080\", \"[::1]:8080\", \"*:8080\", \":8080\", \"8080\", "
    "\"localhost:8080\"";

}  // namespace

bool parse_listen_address(std::string_view text, ListenAddress* out, std::string* error,
                          std::string* hint) {
  error->clear();
  hint->clear();
  uint16_t port = 0;
  auto bad_port = [&](std::string_view port_text) {
    *error = "invalid port '" + std::string(port_text) + "' in listen address '" +
             std::string(text) + "'";
    *hint = "a port is an integer 0..65535 (0 = any free port)";
    return false;
  };

  if (text.empty()) {
    *error = "empty listen address";
    *hint = std::string(kForms);
    return false;
  }

  // "8080": every IPv4 interface.
  if (text.find(':') == std::string_view::npos) {
    bool digits = text.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits) {
      *error = "listen address '" + std::string(text) + "' has no port";
      *hint = std::string(kForms);
      return false;
    }
    if (!parse_port(text, &port)) return bad_port(text);
    in_addr any{};
    any.s_addr = htonl(INADDR_ANY);
    set_ipv4(out, any, port);
    out->text = std::string(text);
    return true;
  }

  // "[IPv6]:port"
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      *error = "listen address '" + std::string(text) + "' has '[' without ']'";
      *hint = "write IPv6 addresses in brackets: \"[::1]:8080\"";
      return false;
    }
    std::string host(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      *error = "listen address '" + std::string(text) + "' has no port";
      *hint = "write IPv6 addresses in brackets followed by the port: \"[::1]:8080\"";
      return false;
    }
    if (!parse_port(rest.substr(1), &port)) return bad_port(rest.substr(1));
    in6_addr ip{};
    if (host.find('%') != std::string::npos || inet_pton(AF_INET6, host.c_str(), &ip) != 1) {
      *error = "invalid IPv6 address '" + host + "' in listen address '" + std::string(text) + "'";
      *hint =
          host.find('%') != std::string::npos
              ? "scoped (link-local) addresses are not supported; use a global address or \"[::]\""
              : "for example \"[::1]:8080\" or \"[::]:8080\" for every IPv6 interface";
      return false;
    }
    out->addr = sockaddr_storage{};
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out->addr);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    sin6->sin6_addr = ip;
    out->addr_len = sizeof(sockaddr_in6);
    out->text = std::string(text);
    return true;
  }

  size_t colon = text.rfind(':');
  if (text.find(':') != colon) {
    *error =
        "listen address '" + std::string(text) + "' looks like an IPv6 address without brackets";
    *hint = "write IPv6 addresses in brackets: \"[::1]:8080\"";
    return false;
  }
  std::string host(text.substr(0, colon));
  std::string_view port_text = text.substr(colon + 1);
  if (port_text.empty()) {
    *error = "listen address '" + std::string(text) + "' has no port";
    *hint = std::string(kForms);
    return false;
  }
  if (!parse_port(port_text, &port)) return bad_port(port_text);

  in_addr ip{};
  if (host.empty() || host == "*") {
    ip.s_addr = htonl(INADDR_ANY);
  } else if (host == "localhost") {
    ip.s_addr = htonl(INADDR_LOOPBACK);
  } else if (inet_pton(AF_INET, host.c_str(), &ip) != 1) {
    bool looks_numeric = host.find_first_not_of("0123456789.") == std::string::npos;
    *error = looks_numeric ? "invalid IPv4 address '" + host + "' in listen address '" +
                                 std::string(text) + "'"
                           : "listen address '" + std::string(text) +
                                 "' names a host; only IP addresses and 'localhost' are accepted";
    *hint = looks_numeric ? "an IPv4 address is four numbers 0..255, e.g. \"192.168.1.10:80\""
                          : "use the interface's IP address, or \"*:" + std::string(port_text) +
                                "\" for every interface";
    return false;
  }
  set_ipv4(out, ip, port);
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
