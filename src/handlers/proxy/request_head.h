// The head the proxy sends upstream for a client's request, as one pure function: request line,
// fields (rewritten by headers.h's rules), the body's framing. The exchange calls it before each
// attempt; the fuzz target tests/fuzz/proxy_forwarding/ checks that what it writes parses as
// exactly the one request that was routed and checked, whatever the client sent.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "handlers/proxy/headers.h"
#include "peregrine/request.h"

namespace peregrine::proxy {

// The route's path rewrite: the prefix it matched replaced by `replacement` (empty: stripped).
struct PathMapping {
  bool enabled = false;
  std::string_view prefix;
  std::string_view replacement;
};

// Appends the whole head, ending with the empty line. The request line carries the client's
// method, raw path (mapped) and query as the parser or the HTTP/2 checks accepted them; the body
// keeps its own framing (Content-Length or chunked) whether or not the request asks to upgrade.
// `scratch` is reused storage for the field views.
void append_request_head(std::string& out, const Request& request, const PathMapping& mapping,
                         const RequestContext& context, const RequestOptions& options,
                         std::vector<HeaderView>& scratch);

}  // namespace peregrine::proxy
