// The --deflate flag of the WebSocket examples: "on" (the library's default, permessage-deflate
// without context takeover), "off" (never negotiated: what a benchmark of raw framing wants) or
// "takeover" (context takeover both ways: a compressor per connection).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "peregrine/websocket.h"

namespace examples {

inline void apply_deflate_mode(peregrine::WebSocketOptions& options,
                               std::map<std::string, std::string>& flags) {
  auto it = flags.find("--deflate");
  if (it == flags.end() || it->second == "on") return;
  if (it->second == "off") {
    options.permessage_deflate.enabled = false;
  } else if (it->second == "takeover") {
    options.permessage_deflate.server_context_takeover = true;
    options.permessage_deflate.client_context_takeover = true;
  } else {
    std::fprintf(stderr, "--deflate %s: expected on, off or takeover\n", it->second.c_str());
    std::exit(2);
  }
}

}  // namespace examples
