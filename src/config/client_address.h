// Readers for [client_address] (trusted proxies, the forwarding header, PROXY protocol senders)
// and [request_id]. See docs/access.md.
#pragma once

#include <toml++/toml.h>

#include "config/config.h"
#include "config/reader.h"

namespace peregrine::config {

void read_client_address(Reader& reader, const toml::node& node, ClientAddress* out);
void read_request_id(Reader& reader, const toml::node& node, RequestIdOptions* out);
// Listener checks once everything is read: proxy_protocol_from without a PROXY listener.
void check_client_address(Reader& reader, const toml::node* node, const Config& config);

}  // namespace peregrine::config
