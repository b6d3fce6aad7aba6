#include "core/cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace peregrine {

std::optional<Cidr> Cidr::parse(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<Cidr> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  const size_t slash = text.find('/');
  const std::string address(text.substr(0, slash));
  Cidr cidr;
  unsigned width = 0;
  if (inet_pton(AF_INET, address.c_str(), cidr.network) == 1) {
    cidr.family = AF_INET;
    width = 32;
  } else if (inet_pton(AF_INET6, address.c_str(), cidr.network) == 1) {
    cidr.family = AF_INET6;
    width = 128;
  } else {
    return fail("\"" + address + "\" is not an IPv4 or IPv6 address");
  }
  unsigned prefix = width;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
        prefix > width)
      return fail("the prefix length after '/' must be 0.." + std::to_string(width));
  }
  cidr.prefix = static_cast<uint8_t>(prefix);
  uint8_t mask[16] = {};
  for (unsigned bit = 0; bit < prefix; ++bit)
    mask[bit / 8] |= static_cast<uint8_t>(0x80 >> (bit % 8));
  for (unsigned i = 0; i < width / 8; ++i) {
    if (cidr.network[i] & ~mask[i])
      return fail("\"" + std::string(text) +
                  "\" has host bits set beyond its prefix; write the network address");
  }
  // Loaded as contains_ip() loads an address: the same bytes into the same words.
  std::memcpy(cidr.words_, cidr.network, width / 8);
  std::memcpy(cidr.masks_, mask, width / 8);
  return cidr;
}

std::string Cidr::to_string() const {
  char text[INET6_ADDRSTRLEN] = "";
  inet_ntop(family, network, text, sizeof text);
  return std::string(text) + "/" + std::to_string(prefix);
}

}  // namespace peregrine
