#include "server/route_table.h"

#include "handlers/return/return_handler.h"
#include "http/router.h"

namespace peregrine::server {

Ref<RouteTable> RouteTable::build(std::shared_ptr<const config::Config> config, const Clock& clock,
                                  const HandlerRegistry& registry, AccessLogWriter& log_writer,
                                  std::string* error) {
  Ref<RouteTable> table(new RouteTable);
  table->config_ = config;
  table->mime_ = std::make_unique<static_files::MimeTable>(config->mime_types);
  table->sites_.reserve(config->sites.size());
  for (const config::Site& site : config->sites) {
    SiteRuntime runtime{&site, {}, nullptr, nullptr};
    for (const config::Route& route : site.routes) {
      std::shared_ptr<Handler> handler;
      switch (route.handler) {
        case config::HandlerKind::kStatic: {
          std::string strip = route.static_files.alias ? route.pattern : std::string();
          auto files = std::make_shared<static_files::StaticHandler>(route.static_files, strip,
                                                                     *table->mime_, clock);
          if (!files->ok()) {
            *error = "cannot open root " + route.static_files.root;
            return {};
          }
          handler = std::move(files);
          break;
        }
        case config::HandlerKind::kReturn:
          handler =
              std::make_shared<return_route::ReturnHandler>(route.return_options, route.regex);
          break;
        case config::HandlerKind::kApplication: {
          auto it = registry.find(route.handler_name);
          if (it == registry.end() || !(handler = it->second())) {
            *error = route.pos.file + ":" + std::to_string(route.pos.line) + ":" +
                     std::to_string(route.pos.column) + ": no handler named '" +
                     route.handler_name + "' is registered";
            return {};
          }
          break;
        }
      }
      runtime.routes.push_back({&route, std::move(handler)});
    }
    if (!site.error_pages.empty() && !site.static_files.root.empty()) {
      config::StaticOptions pages = site.static_files;
      pages.dotfiles = true;  // the operator named these files explicitly
      runtime.error_pages =
          std::make_unique<static_files::StaticHandler>(pages, std::string(), *table->mime_, clock);
    }
    if (site.access_log.format != config::AccessLogFormat::kOff) {
      int sink = log_writer.open_sink(site.access_log.path, error);
      if (sink < 0) return {};
      runtime.access_log =
          std::make_unique<AccessLogBuffer>(log_writer, sink, site.access_log.format);
    }
    table->sites_.push_back(std::move(runtime));
  }
  return table;
}

SiteRuntime& RouteTable::site_for(std::string_view host) {
  return sites_[http::select_site(*config_, host)];
}

void RouteTable::flush_logs() {
  for (SiteRuntime& site : sites_)
    if (site.access_log) site.access_log->flush();
}

}  // namespace peregrine::server
