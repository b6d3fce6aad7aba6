// Pure matching of a request to a site (by Host) and a route (first match in declared order).
#pragma once

#include <string_view>
#include <vector>

#include "config/config.h"

namespace peregrine::http {

// "Example.COM:8080" -> "Example.COM", "[::1]:80" -> "[::1]". No allocation.
std::string_view host_without_port(std::string_view host);

// True when `host` (any case, no port) matches `pattern` ("example.com" or "*.example.com";
// a wildcard matches one or more leading labels, not the bare domain).
bool host_matches(std::string_view pattern, std::string_view host);

// Index of the site serving `host`, or config.default_site.
size_t select_site(const config::Config& config, std::string_view host);

bool route_matches(const config::Route& route, std::string_view path);

// True when the route takes `method` (exact, case-sensitive: methods are case-sensitive tokens,
// RFC 9110 9.1). A route without `methods` takes any; its handler may still answer 405.
// Inline: most routes list no methods, and the check is on every request's path.
bool method_listed(const config::Route& route, std::string_view method);
inline bool method_allowed(const config::Route& route, std::string_view method) {
  return route.methods.empty() || method_listed(route, method);
}

}  // namespace peregrine::http
