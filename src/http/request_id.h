// Request IDs: one per request, made here or passed on from a trusted client, so a request can
// be followed from the access log into the back ends' logs.
#pragma once

#include <cstddef>
#include <string_view>

#include "peregrine/request.h"

namespace peregrine::http {

inline constexpr size_t kRequestIdLength = 32;  // a made one: 16 random bytes in hex
inline constexpr size_t kMaxIncomingRequestIdLength = 128;

// 16 bytes from this thread's generator (xoshiro256**, seeded once from getrandom: no system
// call per request), as 32 lower-case hex digits.
void make_request_id(char out[kRequestIdLength]);

// What an incoming ID may be: 1..128 bytes of letters, digits and - _ . : / + = @. Anything else
// (spaces, quotes, control bytes) could forge a log line or a header downstream.
bool valid_request_id(std::string_view id);

// Gives the request its ID: the first `header_name` header's value when `trust_incoming` and
// valid, else a new one made into `storage` (which must outlive the request). The header
// then carries exactly that ID (other copies are removed, one is added if none was sent and
// there is room), so FastCGI (HTTP_X_REQUEST_ID) and proxied back ends receive it with the
// other headers. Sets request.request_id.
void assign_request_id(Request& request, std::string_view header_name, bool trust_incoming,
                       char storage[kRequestIdLength]);

}  // namespace peregrine::http
