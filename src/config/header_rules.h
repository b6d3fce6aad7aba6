// The one reader of header rule tables `{ set = {...}, add = {...}, remove = [...] }`: the
// proxy's request_headers and response_headers, and the `headers` of a site or route (which
// also take `always`).
#pragma once

#include <string>

#include "config/reader.h"
#include "http/header_edits.h"

namespace peregrine::config {

enum class HeaderRulesFor {
  kProxyRequest,   // what a proxy route sends to its back end (Host is proxy_host's)
  kProxyResponse,  // what a proxy route passes on from its back end
  kResponse,       // what any route sends to the client (`headers`, with `always`)
};

// Reads the table at `node` (named `name` in messages) into `out`. Framing and connection
// headers are refused with a hint; so are Host for a proxy request and, for `headers`,
// Strict-Transport-Security (a site's tls.hsts, sent only over TLS).
void read_header_rules(Reader& reader, const toml::node& node, const std::string& name,
                       HeaderRulesFor kind, http::HeaderRuleSet* out);

}  // namespace peregrine::config
