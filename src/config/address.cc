#include "config/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>

namespace peregrine::config {

namespace {

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

struct Words {
  const char* what;     // "listen address"
  const char* forms;    // the hint that lists the valid forms
  const char* unix_eg;  // an example unix: address
  const char* ipv4_eg;  // an example IPv4 address with a port
};

Words words(AddressRole role) {
  if (role == AddressRole::kListen)
    return {"listen address",
            "valid forms: \"127.0.0.1:8080\", \"[::1]:8080\", \"*:8080\", \":8080\", \"8080\", "
            "\"localhost:8080\", \"unix:/run/peregrine.sock\"",
            "unix:/run/peregrine.sock", "192.168.1.10:80"};
  return {"upstream address",
          "valid forms: \"127.0.0.1:9000\", \"[::1]:9000\", \"localhost:9000\", "
          "\"unix:/run/php/php-fpm.sock\"",
          "unix:/run/php/php8.2-fpm.sock", "192.168.1.10:8080"};
}

bool parse_unix(std::string_view text, AddressRole role, SocketAddress* out, std::string* error,
                std::string* hint) {
  std::string_view path = text.substr(5);
  if (path.empty() || path.front() != '/') {
    *error = "unix socket path in " + quoted(text) + " is not absolute";
    *hint = "write unix: followed by an absolute path, e.g. \"" + std::string(words(role).unix_eg) +
            "\"";
    return false;
  }
  if (has_space_or_control(path)) {
    *error = "unix socket path in " + quoted(text) + " contains spaces or control characters";
    return false;
  }
  sockaddr_un un{};
  if (path.size() >= sizeof(un.sun_path)) {
    *error = "unix socket path in " + quoted(text) + " is too long (" +
             std::to_string(path.size()) + " bytes)";
    *hint = "the kernel limit is " + std::to_string(sizeof(un.sun_path) - 1) +
            " bytes; use a shorter path or a symbolic link to the directory";
    return false;
  }
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, path.data(), path.size());
  out->addr = sockaddr_storage{};
  std::memcpy(&out->addr, &un, sizeof un);
  out->len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return true;
}

void set_ipv4(SocketAddress* out, in_addr ip, uint16_t port) {
  out->addr = sockaddr_storage{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&out->addr);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  sin->sin_addr = ip;
  out->len = sizeof(sockaddr_in);
}

void set_ipv6(SocketAddress* out, const in6_addr& ip, uint16_t port) {
  out->addr = sockaddr_storage{};
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out->addr);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  sin6->sin6_addr = ip;
  out->len = sizeof(sockaddr_in6);
}

}  // namespace

bool has_space_or_control(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return true;
  }
  return false;
}

bool parse_port(std::string_view text, bool zero_ok, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535 || (value == 0 && !zero_ok)) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool parse_socket_address(std::string_view text, AddressRole role, SocketAddress* out,
                          std::string* error, std::string* hint) {
  error->clear();
  hint->clear();
  const bool listen = role == AddressRole::kListen;
  const Words w = words(role);
  const std::string what = std::string(w.what) + " " + quoted(text);
  if (text.empty()) {
    *error = "empty " + std::string(w.what);
    *hint = w.forms;
    return false;
  }
  if (text.starts_with("unix:")) return parse_unix(text, role, out, error, hint);
  if (!listen && text.find("://") != std::string_view::npos) {
    *error = what + " is a URL";
    *hint = "write the address alone, without a scheme: " + std::string(w.forms);
    return false;
  }
  if (has_space_or_control(text)) {
    *error = what + " contains spaces or control characters";
    return false;
  }
  uint16_t port = 0;
  auto no_port = [&](std::string hint_text) {
    *error = what + " has no port";
    *hint = std::move(hint_text);
    return false;
  };
  auto port_ok = [&](std::string_view port_text) {
    if (parse_port(port_text, listen, &port)) return true;
    *error = "invalid port " + quoted(port_text) + " in " + what;
    *hint = listen ? "a port is an integer 0..65535 (0 = any free port)"
                   : "a port is an integer 1..65535";
    return false;
  };

  // "8080": every IPv4 interface.
  if (listen && text.find(':') == std::string_view::npos) {
    if (text.find_first_not_of("0123456789") != std::string_view::npos) return no_port(w.forms);
    if (!port_ok(text)) return false;
    set_ipv4(out, in_addr{htonl(INADDR_ANY)}, port);
    return true;
  }

  // "[IPv6]:port"
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      *error = what + " has '[' without ']'";
      *hint = "write IPv6 addresses in brackets: \"[::1]:8080\"";
      return false;
    }
    std::string host(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (rest.size() < 2 || rest.front() != ':')
      return no_port("write IPv6 addresses in brackets followed by the port: \"[::1]:8080\"");
    if (!port_ok(rest.substr(1))) return false;
    in6_addr ip{};
    const bool scoped = host.find('%') != std::string::npos;
    if (scoped || inet_pton(AF_INET6, host.c_str(), &ip) != 1) {
      *error = "invalid IPv6 address " + quoted(host) + " in " + what;
      *hint = scoped   ? "scoped (link-local) addresses are not supported; use a global address"
              : listen ? "for example \"[::1]:8080\" or \"[::]:8080\" for every IPv6 "
                         "interface"
                       : "for example \"[::1]:8080\"";
      if (scoped && listen) *hint += " or \"[::]\"";
      return false;
    }
    if (!listen && IN6_IS_ADDR_UNSPECIFIED(&ip)) {
      *error = what + " is the unspecified address";
      *hint = "name the back end's own address, e.g. \"[::1]:8080\"";
      return false;
    }
    set_ipv6(out, ip, port);
    return true;
  }

  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return no_port(w.forms);
  if (text.find(':') != colon) {
    *error = what + " looks like an IPv6 address without brackets";
    *hint = "write IPv6 addresses in brackets: \"[::1]:8080\"";
    return false;
  }
  std::string host(text.substr(0, colon));
  std::string_view port_text = text.substr(colon + 1);
  if (port_text.empty()) return no_port(w.forms);
  if (!port_ok(port_text)) return false;

  in_addr ip{};
  const bool any = host.empty() || host == "*";
  if (any && listen) {
    ip.s_addr = htonl(INADDR_ANY);
  } else if (host == "localhost") {
    ip.s_addr = htonl(INADDR_LOOPBACK);
  } else if (any) {
    *error = what + " has no host";
    *hint = "name the back end, e.g. \"127.0.0.1:" + std::string(port_text) + "\"";
    return false;
  } else if (inet_pton(AF_INET, host.c_str(), &ip) != 1) {
    if (host.find_first_not_of("0123456789.") == std::string::npos) {
      *error = "invalid IPv4 address " + quoted(host) + " in " + what;
      *hint = "an IPv4 address is four numbers 0..255, e.g. \"" + std::string(w.ipv4_eg) + "\"";
    } else {
      *error = what + " names a host; only IP addresses and 'localhost' are accepted";
      *hint = listen ? "use the interface's IP address, or \"*:" + std::string(port_text) +
                           "\" for every interface"
                     : "host names are not resolved (starting must not depend on DNS); write "
                       "the back end's IP address";
    }
    return false;
  }
  if (!listen && ip.s_addr == htonl(INADDR_ANY)) {
    *error = what + " is the unspecified address 0.0.0.0";
    *hint = "name the back end's own address, e.g. \"127.0.0.1:" + std::string(port_text) + "\"";
    return false;
  }
  set_ipv4(out, ip, port);
  return true;
}

}  // namespace peregrine::config
