#include "http/client_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "core/strings.h"

namespace peregrine::http {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// A decimal port, or 0 for Forwarded's obfuscated "_port"; false for anything else.
bool parse_port(std::string_view text, uint16_t* port) {
  *port = 0;
  if (!text.empty() && text.front() == '_') return true;
  if (text.empty() || text.size() > 5) return false;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

// What one hop says: an address, or something that is not one.
enum class Hop : uint8_t { kAddress, kOpaque, kNone };

// Forwarded element: `for=` among `;`-separated pairs. kNone when the element has no `for`.
Hop forwarded_element(std::string_view element, sockaddr_storage* out, socklen_t* len) {
  Hop hop = Hop::kNone;
  size_t i = 0;
  while (i < element.size()) {
    size_t end = i;
    bool quoted = false;
    for (; end < element.size(); ++end) {  // a ';' inside a quoted value does not end the pair
      char c = element[end];
      if (quoted && c == '\\') {
        ++end;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ';' && !quoted) {
        break;
      }
    }
    std::string_view pair = trim(element.substr(i, end - i));
    i = end + 1;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || !ascii_iequals(trim(pair.substr(0, eq)), "for")) continue;
    std::string_view value = trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
      if (value.find('\\') != std::string_view::npos) return Hop::kOpaque;  // no address has one
    }
    if (hop != Hop::kNone) return Hop::kOpaque;  // two `for=` in one element: trust neither
    hop = parse_node(value, out, len) ? Hop::kAddress : Hop::kOpaque;
  }
  return hop;
}

// Calls `visit(element)` for each comma-separated element of a Forwarded value, commas inside
// quoted strings not counting.
template <typename Visit>
void forwarded_elements(std::string_view value, Visit&& visit) {
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i < value.size()) {
      char c = value[i];
      if (quoted && c == '\\') {
        ++i;
        continue;
      }
      if (c == '"') quoted = !quoted;
      if (c != ',' || quoted) continue;
    }
    visit(value.substr(start, std::min(i, value.size()) - start));
    start = i + 1;
  }
}

}  // namespace

bool in_any(std::span<const Cidr> networks, const sockaddr* address) {
  for (const Cidr& network : networks)
    if (network.contains(address)) return true;
  return false;
}

bool parse_node(std::string_view text, sockaddr_storage* out, socklen_t* out_len) {
  text = trim(text);
  char ip[INET6_ADDRSTRLEN + 1];
  uint16_t port = 0;
  std::string_view host;
  bool v6 = false;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !parse_port(rest.substr(1), &port))) return false;
    v6 = true;
  } else {
    const size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      host = text;  // a bare IPv6 address (X-Forwarded-For writes them so)
      v6 = true;
    } else if (colon != std::string_view::npos) {
      host = text.substr(0, colon);
      if (!parse_port(text.substr(colon + 1), &port)) return false;
    } else {
      host = text;
    }
  }
  if (host.empty() || host.size() >= sizeof ip) return false;
  std::memcpy(ip, host.data(), host.size());
  ip[host.size()] = '\0';
  std::memset(out, 0, sizeof *out);
  if (!v6) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    if (inet_pton(AF_INET, ip, &in->sin_addr) != 1) return false;
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    *out_len = sizeof(sockaddr_in);
    return true;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, ip, &in6->sin6_addr) != 1) return false;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  *out_len = sizeof(sockaddr_in6);
  return true;
}

// Walked left to right, which is equivalent to the right-to-left walk described in the header
// and needs no list of hops: the answer is decided by the last hop that stops the walk.
bool forwarded_client(std::span<const Header> headers, ForwardedHeader which,
                      std::span<const Cidr> trusted, sockaddr_storage* out, socklen_t* out_len) {
  const std::string_view name =
      which == ForwardedHeader::kForwarded ? "forwarded" : "x-forwarded-for";
  bool have = false;      // *out holds the answer so far
  bool take_next = true;  // the next trusted hop becomes the answer (no stopper to its right yet)
  sockaddr_storage hop_address;
  socklen_t hop_len = 0;
  auto visit = [&](Hop hop) {
    if (hop == Hop::kNone) return;
    if (hop == Hop::kOpaque) {
      have = false;
      take_next = true;
      return;
    }
    const bool is_trusted = in_any(trusted, reinterpret_cast<const sockaddr*>(&hop_address));
    if (!is_trusted || take_next) {
      std::memcpy(out, &hop_address, sizeof hop_address);
      *out_len = hop_len;
      have = true;
      take_next = false;
    }
  };
  for (const Header& header : headers) {
    if (!ascii_iequals(header.name, name)) continue;
    if (which == ForwardedHeader::kForwarded) {
      forwarded_elements(header.value, [&](std::string_view element) {
        visit(forwarded_element(element, &hop_address, &hop_len));
      });
      continue;
    }
    std::string_view rest = header.value;
    for (;;) {
      const size_t comma = rest.find(',');
      std::string_view element = trim(rest.substr(0, comma));
      if (!element.empty())  // empty list elements are allowed and mean nothing
        visit(parse_node(element, &hop_address, &hop_len) ? Hop::kAddress : Hop::kOpaque);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return have;
}

}  // namespace peregrine::http
