#include "handlers/application/config.h"

#include "config/reader.h"
#include "handlers/application/async_call.h"
#include "handlers/application/registry.h"
#include "handlers/application/websocket_endpoint.h"

namespace peregrine::application {

namespace {

class ApplicationType final : public handlers::HandlerType {
 public:
  ApplicationType() {
    name = "application";
    selection = Selection::kNamed;
  }

  std::optional<std::string_view> static_key(std::string_view) const override {
    return std::nullopt;
  }

  // `selector` is the `handler` value, already checked to be a token.
  void read(config::RouteContext&, const toml::table&, const toml::node& selector,
            config::Route* route) const override {
    const auto* name = selector.as_string();
    route->options = options_for(name != nullptr ? name->get() : std::string());
  }

  std::string describe(const config::Route& route) const override {
    return route.options_as<ApplicationOptions>()->name;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string* error) const override {
    const std::string& name = context.route.options_as<ApplicationOptions>()->name;
    handlers::Runtime runtime;
    auto it = context.applications.find(name);
    if (it != context.applications.end() && it->second.async) {
      if (std::shared_ptr<AsyncHandler> app = it->second.async())
        runtime.stream = std::make_shared<AsyncAdapter>(std::move(app));
    } else if (it != context.applications.end() && it->second.sync) {
      runtime.handler = it->second.sync();
    } else if (it != context.applications.end() && it->second.websocket) {
      if (std::shared_ptr<WebSocketHandler> app = it->second.websocket())
        runtime.stream = std::make_shared<WebSocketEndpoint>(
            it->first, std::move(app), it->second.websocket_options, context.env.draining);
    }
    if (!runtime.handler && !runtime.stream)
      *error = context.position() + ": no handler named '" + name + "' is registered";
    return runtime;
  }
};

}  // namespace

const handlers::HandlerType& handler_type() {
  static const ApplicationType type;
  return type;
}

std::shared_ptr<const ApplicationOptions> options_for(std::string name) {
  auto options = std::make_shared<ApplicationOptions>();
  options->name = std::move(name);
  return options;
}

}  // namespace peregrine::application
