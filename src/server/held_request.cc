#include "server/held_request.h"

#include <vector>

#include "core/spares.h"

namespace peregrine::server {
namespace {

// Enough for the exchanges a worker typically has in flight at once; beyond it they are freed.
constexpr size_t kKeep = 64;

struct SpareRequests {
  std::vector<Request*> list;
  ~SpareRequests() {
    for (Request* request : list) delete request;
  }
};

SpareRequests& spares() {
  thread_local SpareRequests kept;
  return kept;
}

}  // namespace

void RequestRecycler::operator()(Request* request) const {
  std::vector<Request*>& list = spares().list;
  // Under AddressSanitizer every request is fresh memory, so a use after the exchange is caught.
  if (!kRecycleAllocations || list.size() >= kKeep) {
    delete request;
    return;
  }
  request->clear();
  // What clear() keeps belongs to the connection the request came from, which may be gone.
  request->peer = nullptr;
  request->peer_len = 0;
  request->socket_peer = nullptr;
  request->socket_peer_len = 0;
  request->local = nullptr;
  request->local_len = 0;
  list.push_back(request);
}

HeldRequest spare_request() {
  std::vector<Request*>& list = spares().list;
  if (list.empty()) return HeldRequest(new Request);
  Request* request = list.back();
  list.pop_back();
  return HeldRequest(request);
}

}  // namespace peregrine::server
