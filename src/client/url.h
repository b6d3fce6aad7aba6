// The URLs the HTTP client (peregrine/http_client.h) takes: http:// and https:// only, an
// authority without userinfo, and a request-target that can go on the wire as it is. Pure, so
// every refusal is unit-tested (tests/unit/client/url_test.cc) without a socket.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace peregrine::client {

struct Url {
  bool tls = false;       // https
  std::string host;       // "example.com", "127.0.0.1", "::1" (no brackets)
  uint16_t port = 0;      // the default (80, 443) when none is written
  std::string authority;  // the Host header: host as written, ":port" only when not the default
  std::string path;       // "/a/b" (still percent-encoded), "/" when empty
  std::string query;      // after '?', without it; "" when absent
  // "host:port" ("[::1]:8080") as config::parse_upstream_address reads it.
  std::string address() const;
};

// nullopt with *error set ("unsupported scheme", "missing host"...) for anything else. A
// fragment is dropped (it never goes on the wire).
std::optional<Url> parse_url(std::string_view text, std::string* error);

}  // namespace peregrine::client
