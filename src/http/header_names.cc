#include "http/header_names.h"

#include <cstdint>

#include "core/strings.h"

namespace peregrine::http {
namespace {

enum Role : uint8_t {
  kHopByHop = 1,
  kFraming = 2,
  kSetByConnection = 4,
  kManaged = 8,  // route header rules may not touch it
};

// Runs on every header of every proxied or FastCGI message, several times: the length picks
// the one or two candidates, so most names cost a switch and nothing else.
uint8_t roles_of(std::string_view name) {
  auto is = [name](const auto& candidate) { return token_is(name, candidate); };
  switch (name.size()) {
    case 2:
      return is("te") ? kHopByHop | kManaged : 0;
    case 4:
      return is("date") ? kSetByConnection : 0;
    case 6:
      return is("server") ? kSetByConnection : 0;
    case 7:
      return is("upgrade") || is("trailer") ? kHopByHop | kManaged : 0;
    case 10:
      return is("connection") || is("keep-alive") ? kHopByHop | kManaged : 0;
    case 14:
      if (is("content-length")) return kFraming | kSetByConnection | kManaged;
      // RFC 9113 3.1 (RFC 7540 3.2.1): the h2c upgrade's settings, for this hop only.
      return is("http2-settings") ? kHopByHop | kManaged : 0;
    case 16:
      return is("proxy-connection") ? kHopByHop | kManaged : 0;
    case 17:
      return is("transfer-encoding") ? kHopByHop | kFraming | kManaged : 0;
    case 18:
      return is("proxy-authenticate") ? kHopByHop : 0;
    case 19:
      return is("proxy-authorization") ? kHopByHop : 0;
    default:
      return 0;
  }
}

}  // namespace

bool is_hop_by_hop(std::string_view name) {
  return roles_of(name) & kHopByHop;
}
bool is_framing(std::string_view name) {
  return roles_of(name) & kFraming;
}
bool is_set_by_connection(std::string_view name) {
  return roles_of(name) & kSetByConnection;
}
bool is_managed(std::string_view name) {
  return roles_of(name) & kManaged;
}

}  // namespace peregrine::http
