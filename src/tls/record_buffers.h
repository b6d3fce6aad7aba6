// OpenSSL's record buffers, kept per thread between uses.
//
// With SSL_MODE_RELEASE_BUFFERS (server_context.cc) a connection holds no TLS buffers between
// requests, so an idle TLS connection costs what its socket costs. The price is a malloc and a
// free of a 16-18 KB block for the read buffer and again for the write buffer, on every
// keep-alive request. glibc serves blocks that size from its sorted bins, not its per-thread
// cache: about 3 % of a TLS keep-alive request's CPU (perf, wrk -c100 on a 663-byte page),
// where H2O, which keeps its buffers, spends under 1 %. Each thread keeps a few such blocks for
// the next connection that needs one.
#pragma once

#include <cstddef>

namespace peregrine::tls {

// Routes OpenSSL's allocations through the per-thread blocks. It must run before OpenSSL
// allocates anything, so first thing in main(); returns false when that was too late (OpenSSL's
// own allocator then stays, and nothing else changes). Under AddressSanitizer it does nothing,
// so that a use after free inside OpenSSL is still caught.
bool keep_record_buffers();

// Blocks this thread holds for reuse (tests).
size_t record_buffers_kept();

}  // namespace peregrine::tls
