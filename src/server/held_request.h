// A request that outlives the event that parsed it (a body still arriving, an asynchronous
// handler) keeps the very object the parser filled: the worker hands its scratch request over and
// takes a spare in its place. Building and copying a 3.5 KB Request for each such exchange cost
// ~660 instructions, a fifth of an asynchronous "Hello world" (bench/library_cost.py).
//
// Spares are kept per thread and constructed once; a recycled request comes back cleared, with
// nothing that pointed into its last connection.
#pragma once

#include <memory>

#include "peregrine/request.h"

namespace peregrine::server {

struct RequestRecycler {
  void operator()(Request* request) const;
};
using HeldRequest = std::unique_ptr<Request, RequestRecycler>;

// A spare from this thread, or a new request.
HeldRequest spare_request();

}  // namespace peregrine::server
