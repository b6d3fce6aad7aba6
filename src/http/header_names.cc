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

struct Entry {
  std::string_view name;
  uint8_t roles;
};

constexpr Entry kTable[] = {
    {"Connection", kHopByHop | kManaged},
    {"Keep-Alive", kHopByHop | kManaged},
    {"Proxy-Connection", kHopByHop | kManaged},
    {"TE", kHopByHop | kManaged},
    {"Trailer", kHopByHop | kManaged},
    {"Transfer-Encoding", kHopByHop | kFraming | kManaged},
    {"Upgrade", kHopByHop | kManaged},
    {"Proxy-Authenticate", kHopByHop},
    {"Proxy-Authorization", kHopByHop},
    {"Content-Length", kFraming | kSetByConnection | kManaged},
    {"Date", kSetByConnection},
    {"Server", kSetByConnection},
};

// Runs on every header of every proxied or FastCGI message: most names match no entry's
// length, so the length decides before any comparison.
uint8_t roles_of(std::string_view name) {
  switch (name.size()) {
    case 2:
    case 4:
    case 6:
    case 7:
    case 10:
    case 14:
    case 16:
    case 17:
    case 18:
    case 19:
      for (const Entry& e : kTable)
        if (e.name.size() == name.size() && ascii_iequals(e.name, name)) return e.roles;
      return 0;
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
