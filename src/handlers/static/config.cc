#include "handlers/static/config.h"

#include "config/reader.h"
#include "handlers/static/static_handler.h"

namespace peregrine::static_files {

namespace {

class StaticType final : public handlers::HandlerType {
 public:
  StaticType() {
    name = "static";
    selection = Selection::kDefault;
    // A token outside these (a WebDAV method, say) gets 405 with this Allow.
    default_methods = "GET, HEAD, OPTIONS";
  }

  std::optional<std::string_view> static_key(std::string_view) const override {
    return std::nullopt;
  }

  void read(config::RouteContext& context, const toml::table& table, const toml::node&,
            config::Route* route) const override {
    if (route->static_files.root.empty() && context.reader.error_count() == context.errors_before) {
      context.reader.error(
          table.source(), "static route has no root",
          "set root on the route or on its [[site]], or give the route a 'return'");
    }
  }

  std::string describe(const config::Route& route) const override {
    return route.static_files.root;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string* error) const override {
    const config::Route& route = context.route;
    std::string strip = route.static_files.alias ? route.pattern : std::string();
    auto files = std::make_shared<StaticHandler>(route.static_files, strip, context.mime,
                                                 context.env.clock, route.compress);
    if (!files->ok()) {
      *error = "cannot open root " + route.static_files.root;
      return {};
    }
    return {std::move(files), nullptr};
  }
};

}  // namespace

const handlers::HandlerType& handler_type() {
  static const StaticType type;
  return type;
}

}  // namespace peregrine::static_files
