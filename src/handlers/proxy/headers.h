// Header rules for the reverse proxy, as pure functions: what a proxied request carries to the
// upstream and what an upstream response carries back to the client. No I/O, no allocation beyond
// the returned vectors.
//
// Input is the received header list as (name, value) views in arrival order; output is a new
// HeaderList of owned strings in the order the headers should be sent (received headers keep
// their order; headers we add come after them). append_header_block() serializes a list as
// "Name: value\r\n" lines for the caller's request/response head.
//
// Request order of operations (rewrite_request_headers):
//   1. hop-by-hop headers removed: Connection and every header it names, Keep-Alive, TE, Trailer,
//      Transfer-Encoding (the proxy re-frames the body), Upgrade (kept when tunnelling), and
//      Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, HTTP2-Settings. When
//      tunnelling, "Upgrade" is kept less any h2c (never offered to a back end) and
//      "Connection: upgrade" is added.
//   2. Host: passed through, replaced by the upstream's host, or a fixed value (HostMode).
//   3. forwarding headers: X-Forwarded-For (received values joined, then ", " + client IP),
//      X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP (each replaces what the client sent),
//      Forwarded (RFC 7239: a new element appended to any received ones). Each can be turned off;
//      a disabled X-Forwarded-* / Forwarded header from the client is passed through untouched.
//   4. route rules: `remove` (names), then `set` (replaces every header of that name; an empty
//      value only removes), then `add` (appended, existing ones kept). Rules see the result of
//      steps 1-3, so a route can override or remove a forwarding header.
// Response order (rewrite_response_headers): hop-by-hop removal as above; Location and Refresh
// rewritten when they point at the upstream origin; then the route's remove/set/add.
// Names compare case-insensitively everywhere; output keeps the received spelling.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/http1/response_parser.h"

namespace peregrine::proxy {

using HeaderView = http1::FieldView;  // a field as received, by view

struct Header {
  std::string name;
  std::string value;
  bool operator==(const Header&) const = default;
};

using HeaderList = std::vector<Header>;

struct HeaderRules {
  std::vector<std::string> remove;
  std::vector<Header> set;
  std::vector<Header> add;
};

enum class HostMode {
  kPass,      // the client's Host (or upstream_host when the client sent none)
  kUpstream,  // upstream_host
  kFixed,     // fixed_host
};

struct ForwardingOptions {
  bool x_forwarded_for = true;
  bool x_forwarded_proto = true;
  bool x_forwarded_host = true;
  bool x_real_ip = true;
  bool forwarded = false;  // RFC 7239 Forwarded
};

struct RequestOptions {
  HostMode host_mode = HostMode::kPass;
  std::string fixed_host;
  ForwardingOptions forwarding;
  HeaderRules rules;
};

struct RequestContext {
  std::string_view client_ip;      // textual IPv4/IPv6, no brackets, no port
  std::string_view scheme;         // what the client used: "http" or "https"
  std::string_view upstream_host;  // "host[:port]" of the chosen upstream server
  bool tunnel = false;             // an Upgrade (WebSocket) request we will tunnel
};

struct ResponseOptions {
  // "scheme://host[:port]" of the upstream as the back end sees itself, and of the site as the
  // client sees it. Location/Refresh URLs with the upstream origin get the client origin instead.
  // Either empty disables the rewrite.
  std::string upstream_origin;
  std::string client_origin;
  bool rewrite_location = true;
  bool rewrite_refresh = true;
  HeaderRules rules;
};

HeaderList rewrite_request_headers(std::span<const HeaderView> in, const RequestContext& context,
                                   const RequestOptions& options);

// `tunnel`: a 101 answer to an Upgrade we tunnel; Upgrade is kept and "Connection: upgrade" added.
HeaderList rewrite_response_headers(std::span<const HeaderView> in, const ResponseOptions& options,
                                    bool tunnel = false);

// Applies remove, then set, then add to `headers`.
void apply_rules(HeaderList& headers, const HeaderRules& rules);

// The RFC 7239 forwarded-element for one hop: for=, proto=, host= ("for" IPv6 as "[...]" quoted;
// any value that is not a token is a quoted-string). Empty parts are left out.
std::string forwarded_element(std::string_view client_ip, std::string_view scheme,
                              std::string_view host);

// Path mapping for the upstream request: when `path` starts with `prefix` (a match ends at the
// prefix's end, a '/' or a '?'), the prefix is replaced by `replacement` (empty = stripped).
// The result always starts with '/'. nullopt when the path does not start with the prefix.
std::optional<std::string> map_path(std::string_view path, std::string_view prefix,
                                    std::string_view replacement);

// A URL (Location value) rewritten from the upstream origin to the client origin: scheme and host
// compare case-insensitively, a missing port equals the scheme's default (80/443), and the origin
// must be followed by the end, '/', '?' or '#'. nullopt when it does not point at the upstream.
std::optional<std::string> rewrite_url(std::string_view url, std::string_view upstream_origin,
                                       std::string_view client_origin);

// A Refresh value ("5; url=http://up/x", also "5;URL='...'") with its URL rewritten as above.
std::optional<std::string> rewrite_refresh(std::string_view value, std::string_view upstream_origin,
                                           std::string_view client_origin);

// Appends "Name: value\r\n" for every header.
void append_header_block(std::string& out, const HeaderList& headers);

// The common cases without building a HeaderList: append exactly the bytes
// append_header_block(out, rewrite_..._headers(...)) would, or return false with `out`
// unchanged when the general path is needed (route rules, tunnels, Forwarded, a Connection
// header naming other fields, an empty or repeated Host, Location/Refresh to rewrite).
bool append_request_headers_fast(std::string& out, std::span<const HeaderView> in,
                                 const RequestContext& context, const RequestOptions& options);
bool append_response_headers_fast(std::string& out, std::span<const HeaderView> in,
                                  const ResponseOptions& options, bool tunnel = false);

}  // namespace peregrine::proxy
