#include "metrics/labels.h"

namespace peregrine::metrics {

std::string site_label(const config::Site& site) {
  return site.hosts.empty() ? std::string("_") : site.hosts.front();
}

std::string route_label(const config::Route& route) {
  switch (route.match) {
    case config::MatchKind::kExact:
      return "= " + route.pattern;
    case config::MatchKind::kPrefix:
      return route.pattern;
    case config::MatchKind::kExtension:
      return "*." + route.pattern;
    case config::MatchKind::kRegex:
      return "~ " + route.pattern;
  }
  return route.pattern;
}

}  // namespace peregrine::metrics
