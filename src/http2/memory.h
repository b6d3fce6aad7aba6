// Memory for nghttp2 sessions. nghttp2 allocates and frees a handful of small blocks for every
// stream (the stream, its outbound items, copied header fields): at a million streams a second
// malloc and free were a third of the CPU. Each worker thread owns its sessions, so a per-thread
// cache of blocks by size class serves them without locks (see core/spares.h for the same idea).
#pragma once

#include <nghttp2/nghttp2.h>

namespace peregrine::http2 {

// The allocator to pass to nghttp2_session_server_new3. Under AddressSanitizer it is plain
// malloc, so that a use after free is still caught.
nghttp2_mem* thread_memory();

}  // namespace peregrine::http2
