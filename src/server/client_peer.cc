#include "server/client_peer.h"

#include <algorithm>
#include <cstring>

#include "http/client_address.h"

namespace peregrine::server {

void use_forwarded_client(Request& request, const config::ClientAddress& policy,
                          PeerAddress* storage) {
  if (!http::in_any(policy.trusted_proxies, request.peer)) return;
  sockaddr_storage found;
  socklen_t found_len = 0;
  const auto which = policy.header == config::ClientAddressHeader::kForwarded
                         ? http::ForwardedHeader::kForwarded
                         : http::ForwardedHeader::kXForwardedFor;
  if (!http::forwarded_client(request.header_list(), which, policy.trusted_proxies, &found,
                              &found_len))
    return;
  std::memcpy(storage, &found, std::min<size_t>(found_len, sizeof *storage));
  request.peer = &storage->sa;
  request.peer_len = found_len;
}

}  // namespace peregrine::server
