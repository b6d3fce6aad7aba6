#include "http/proxy_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace peregrine::http {
namespace {

constexpr std::string_view kV1Prefix = "PROXY ";
constexpr char kV2Signature[12] = {'\r', '\n', '\r', '\n', '\0', '\r',
                                   '\n', 'Q',  'U',  'I',  'T',  '\n'};
constexpr size_t kV2HeadLength = 16;

ProxyHeader failed(ProxyHeader result, const char* why) {
  result.status = ProxyStatus::kError;
  result.error = why;
  return result;
}

// Splits off the text up to the next single space.
bool next_field(std::string_view* rest, std::string_view* field) {
  const size_t space = rest->find(' ');
  if (space == std::string_view::npos) {
    *field = *rest;
    *rest = {};
  } else {
    *field = rest->substr(0, space);
    rest->remove_prefix(space + 1);
  }
  return !field->empty();
}

bool v1_port(std::string_view text, uint16_t* port) {
  if (text.empty() || text.size() > 5 || (text.size() > 1 && text[0] == '0')) return false;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool v1_address(int family, std::string_view ip, std::string_view port, sockaddr_storage* out,
                socklen_t* len) {
  char text[INET6_ADDRSTRLEN];
  if (ip.size() >= sizeof text) return false;
  std::memcpy(text, ip.data(), ip.size());
  text[ip.size()] = '\0';
  uint16_t number = 0;
  if (!v1_port(port, &number)) return false;
  std::memset(out, 0, sizeof *out);
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    if (inet_pton(AF_INET, text, &in->sin_addr) != 1) return false;
    in->sin_family = AF_INET;
    in->sin_port = htons(number);
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, text, &in6->sin6_addr) != 1) return false;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(number);
  *len = sizeof(sockaddr_in6);
  return true;
}

ProxyHeader parse_v1(std::string_view bytes) {
  ProxyHeader result;
  result.version = 1;
  const size_t limit = std::min(bytes.size(), kProxyV1MaxLength);
  const size_t lf = bytes.substr(0, limit).find('\n');
  if (lf == std::string_view::npos) {
    if (bytes.size() >= kProxyV1MaxLength) return failed(result, "v1 line longer than 107 bytes");
    return result;  // need more
  }
  if (lf == 0 || bytes[lf - 1] != '\r') return failed(result, "v1 line does not end in CRLF");
  std::string_view rest = bytes.substr(kV1Prefix.size(), lf - 1 - kV1Prefix.size());
  result.length = lf + 1;
  std::string_view protocol;
  if (!next_field(&rest, &protocol)) return failed(result, "v1 protocol missing");
  if (protocol == "UNKNOWN") {  // the rest of the line is to be ignored (spec 2.1)
    result.status = ProxyStatus::kDone;
    return result;
  }
  int family;
  if (protocol == "TCP4") {
    family = AF_INET;
  } else if (protocol == "TCP6") {
    family = AF_INET6;
  } else {
    return failed(result, "v1 protocol is not TCP4, TCP6 or UNKNOWN");
  }
  std::string_view source, destination, source_port, destination_port;
  if (!next_field(&rest, &source) || !next_field(&rest, &destination) ||
      !next_field(&rest, &source_port) || !next_field(&rest, &destination_port) || !rest.empty())
    return failed(result, "v1 line does not have four address fields");
  if (!v1_address(family, source, source_port, &result.source, &result.source_len) ||
      !v1_address(family, destination, destination_port, &result.destination,
                  &result.destination_len))
    return failed(result, "v1 address or port is malformed");
  result.has_address = true;
  result.status = ProxyStatus::kDone;
  return result;
}

uint16_t read16(const unsigned char* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

ProxyHeader parse_v2(std::string_view bytes) {
  ProxyHeader result;
  result.version = 2;
  if (bytes.size() < kV2HeadLength) return result;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned version = p[12] >> 4, command = p[12] & 0x0f;
  const unsigned family = p[13] >> 4, transport = p[13] & 0x0f;
  const size_t body = read16(p + 14);
  if (version != 2) return failed(result, "v2 version nibble is not 2");
  if (command > 1) return failed(result, "v2 command is neither LOCAL nor PROXY");
  if (kV2HeadLength + body > kProxyMaxLength) return failed(result, "v2 header too long");
  if (bytes.size() < kV2HeadLength + body) return result;
  result.length = kV2HeadLength + body;
  size_t address_bytes = 0;
  switch (family) {
    case 0:  // AF_UNSPEC
      break;
    case 1:
      address_bytes = 12;
      break;
    case 2:
      address_bytes = 36;
      break;
    case 3:
      address_bytes = 216;
      break;
    default:
      return failed(result, "v2 address family unknown");
  }
  if (transport > 2) return failed(result, "v2 transport protocol unknown");
  if (body < address_bytes) return failed(result, "v2 length shorter than its addresses");
  // TLVs follow the addresses: skipped, but each must fit, or the header is corrupt.
  for (size_t at = kV2HeadLength + address_bytes; at < result.length;) {
    if (result.length - at < 3) return failed(result, "v2 TLV truncated");
    const size_t tlv_length = read16(p + at + 1);
    if (result.length - at - 3 < tlv_length) return failed(result, "v2 TLV overruns the header");
    at += 3 + tlv_length;
  }
  result.status = ProxyStatus::kDone;
  // LOCAL (health checks by the balancer itself) and families other than IP over a stream keep
  // the socket's addresses; a datagram source means nothing on a TCP connection.
  if (command == 0 || transport != 1 || (family != 1 && family != 2)) return result;
  const unsigned char* a = p + kV2HeadLength;
  if (family == 1) {
    auto* src = reinterpret_cast<sockaddr_in*>(&result.source);
    auto* dst = reinterpret_cast<sockaddr_in*>(&result.destination);
    src->sin_family = dst->sin_family = AF_INET;
    std::memcpy(&src->sin_addr, a, 4);
    std::memcpy(&dst->sin_addr, a + 4, 4);
    std::memcpy(&src->sin_port, a + 8, 2);  // both in network order already
    std::memcpy(&dst->sin_port, a + 10, 2);
    result.source_len = result.destination_len = sizeof(sockaddr_in);
  } else {
    auto* src = reinterpret_cast<sockaddr_in6*>(&result.source);
    auto* dst = reinterpret_cast<sockaddr_in6*>(&result.destination);
    src->sin6_family = dst->sin6_family = AF_INET6;
    std::memcpy(&src->sin6_addr, a, 16);
    std::memcpy(&dst->sin6_addr, a + 16, 16);
    std::memcpy(&src->sin6_port, a + 32, 2);
    std::memcpy(&dst->sin6_port, a + 34, 2);
    result.source_len = result.destination_len = sizeof(sockaddr_in6);
  }
  result.has_address = true;
  return result;
}

}  // namespace

ProxyHeader parse_proxy_header(std::string_view bytes) {
  ProxyHeader result;
  if (bytes.empty()) return result;
  // Decide the version from the first bytes; a prefix of either signature needs more.
  const size_t v1_have = std::min(bytes.size(), kV1Prefix.size());
  if (bytes.substr(0, v1_have) == kV1Prefix.substr(0, v1_have)) {
    if (bytes.size() < kV1Prefix.size()) return result;
    return parse_v1(bytes);
  }
  const size_t v2_have = std::min(bytes.size(), sizeof kV2Signature);
  if (std::memcmp(bytes.data(), kV2Signature, v2_have) == 0) {
    if (bytes.size() < sizeof kV2Signature) return result;
    return parse_v2(bytes);
  }
  return failed(result, "no PROXY protocol signature");
}

}  // namespace peregrine::http
