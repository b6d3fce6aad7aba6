// How sites and routes are named in the figures: a site by its first host name ("_" when it
// has none), a route by its match as written in the configuration.
#pragma once

#include <string>

#include "config/config.h"

namespace peregrine::metrics {

std::string site_label(const config::Site& site);
// "/prefix/", "= /exact", "*.php", "~ regex".
std::string route_label(const config::Route& route);

}  // namespace peregrine::metrics
