#include "http/router.h"

#include <algorithm>

#include "core/strings.h"
#include "http/path.h"

namespace peregrine::http {
std::string_view host_without_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  size_t colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

bool host_matches(std::string_view pattern, std::string_view host) {
  if (!host.empty() && host.back() == '.')
    host.remove_suffix(1);  // "example.com." is the same host
  if (pattern.size() > 2 && pattern[0] == '*' && pattern[1] == '.') {
    std::string_view suffix = pattern.substr(1);  // ".example.com"
    return host.size() > suffix.size() &&
           ascii_iequals(host.substr(host.size() - suffix.size()), suffix);
  }
  return ascii_iequals(pattern, host);
}

size_t select_site(const config::Config& config, std::string_view host) {
  if (config.sites.size() <= 1) return config.default_site;
  host = host_without_port(host);
  // Exact names win over wildcards, whatever the order of declaration.
  for (size_t i = 0; i < config.sites.size(); ++i)
    for (const std::string& pattern : config.sites[i].hosts)
      if (pattern[0] != '*' && host_matches(pattern, host)) return i;
  for (size_t i = 0; i < config.sites.size(); ++i)
    for (const std::string& pattern : config.sites[i].hosts)
      if (pattern[0] == '*' && host_matches(pattern, host)) return i;
  return config.default_site;
}

bool route_matches(const config::Route& route, std::string_view path) {
  switch (route.match) {
    case config::MatchKind::kExact:
      return path == route.pattern;
    case config::MatchKind::kPrefix:
      return path.starts_with(route.pattern);
    case config::MatchKind::kExtension:
      // Case-insensitive so that "x.PHP" can never slip past a ".php" route to another handler.
      return ascii_iequals(extension_of(path), route.pattern);
    case config::MatchKind::kRegex:
      return route.regex && route.regex->match(path);
  }
  return false;
}

bool method_listed(const config::Route& route, std::string_view method) {
  return std::find(route.methods.begin(), route.methods.end(), method) != route.methods.end();
}

}  // namespace peregrine::http
