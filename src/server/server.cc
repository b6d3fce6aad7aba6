// The public libperegrine Server: builds a configuration snapshot from code (or a TOML file) and
// hands it, with the registered handlers, to the same ServerProcess the binary uses.
#include "peregrine/server.h"

#include <unistd.h>

#include <mutex>
#include <vector>

#include "config/listen_address.h"
#include "core/log.h"
#include "handlers/application/config.h"
#include "handlers/application/websocket_endpoint.h"
#include "handlers/builtin.h"
#include "handlers/static/config.h"
#include "server/server_process.h"

namespace peregrine {
namespace {

class FunctionHandler final : public Handler {
 public:
  explicit FunctionHandler(Server::HandlerFunction f) : f_(std::move(f)) {}
  void handle(const Request& request, Response& response) override { f_(request, response); }
  // Application code usually reads POST data: give it the body (bounded by max_body_bytes).
  bool wants_body() const override { return true; }

 private:
  Server::HandlerFunction f_;
};

class AsyncFunctionHandler final : public AsyncHandler {
 public:
  explicit AsyncFunctionHandler(Server::AsyncFunction f) : f_(std::move(f)) {}
  void handle(const Request& request, AsyncResponse response) override {
    f_(request, std::move(response));
  }

 private:
  Server::AsyncFunction f_;
};

}  // namespace

struct Server::Impl {
  std::vector<std::string> listen;
  int workers = 0;
  std::string access_log = "off";
  struct CodeRoute {
    std::string prefix;
    std::string handler_name;  // empty: static files from root
    std::string root;
  };
  std::vector<CodeRoute> routes;
  std::string config_file;
  server::HandlerRegistry registry;
  bool handle_signals = true;

  std::mutex mutex;  // guards process and a stop() that arrives before it exists
  server::ServerProcess* process = nullptr;
  int early_stop = 0;

  config::LoadResult build() const;
};

config::LoadResult Server::Impl::build() const {
  if (!config_file.empty()) return config::load_file(config_file, handlers::builtin());
  config::LoadResult result;
  auto cfg = std::make_shared<config::Config>();
  cfg->source = "<code>";
  cfg->handlers = handlers::builtin();
  cfg->workers = workers;
  std::vector<std::string> addresses = listen;
  if (addresses.empty()) addresses.push_back("127.0.0.1:8080");
  for (const std::string& text : addresses) {
    config::ListenAddress address;
    std::string error, hint;
    if (!config::parse_listen_address(text, &address, &error, &hint)) {
      result.errors.push_back({{"<code>", 0, 0}, "listen \"" + text + "\": " + error, hint});
      continue;
    }
    cfg->listen.push_back(address);
  }
  config::Site site;
  site.is_default = true;
  if (access_log == "off") {
    site.access_log.format = config::AccessLogFormat::kOff;
  } else {
    site.access_log.path = access_log;
  }
  for (const CodeRoute& code : routes) {
    config::Route route;
    route.match = config::MatchKind::kPrefix;
    route.pattern = code.prefix;
    if (code.handler_name.empty()) {
      route.type = &static_files::handler_type();
      route.static_files.root = code.root;
      if (::access(code.root.c_str(), R_OK | X_OK) != 0)
        result.errors.push_back({{"<code>", 0, 0},
                                 "static_files root " + code.root + " is not a readable directory",
                                 ""});
    } else {
      route.type = &application::handler_type();
      route.options = application::options_for(code.handler_name);
    }
    site.routes.push_back(std::move(route));
  }
  cfg->sites.push_back(std::move(site));
  if (result.errors.empty()) result.config = std::move(cfg);
  return result;
}

Server::Server() : impl_(std::make_unique<Impl>()) {}
Server::~Server() = default;

Server& Server::listen(std::string address) {
  impl_->listen.push_back(std::move(address));
  return *this;
}
Server& Server::workers(int count) {
  impl_->workers = count;
  return *this;
}
Server& Server::access_log(std::string target) {
  impl_->access_log = std::move(target);
  return *this;
}
Server& Server::route(std::string prefix, std::shared_ptr<Handler> handler) {
  return route_factory(std::move(prefix), [handler] { return handler; });
}
Server& Server::route(std::string prefix, HandlerFunction function) {
  return route(std::move(prefix), std::make_shared<FunctionHandler>(std::move(function)));
}
Server& Server::route_factory(std::string prefix, HandlerFactory factory) {
  std::string name = "route#" + std::to_string(impl_->routes.size());
  impl_->registry[name] = {std::move(factory), nullptr};
  impl_->routes.push_back({std::move(prefix), name, {}});
  return *this;
}
Server& Server::route_async(std::string prefix, AsyncFunction function) {
  return route_async(std::move(prefix),
                     std::make_shared<AsyncFunctionHandler>(std::move(function)));
}
Server& Server::route_async(std::string prefix, std::shared_ptr<AsyncHandler> handler) {
  return route_async_factory(std::move(prefix), [handler] { return handler; });
}
Server& Server::route_async_factory(std::string prefix, AsyncHandlerFactory factory) {
  std::string name = "route#" + std::to_string(impl_->routes.size());
  impl_->registry[name] = {nullptr, std::move(factory)};
  impl_->routes.push_back({std::move(prefix), name, {}});
  return *this;
}
Server& Server::websocket(std::string prefix, WebSocketCallbacks callbacks,
                          WebSocketOptions options) {
  return websocket(std::move(prefix), websocket_handler(std::move(callbacks)), std::move(options));
}
Server& Server::websocket(std::string prefix, std::shared_ptr<WebSocketHandler> handler,
                          WebSocketOptions options) {
  return websocket_factory(
      std::move(prefix), [handler] { return handler; }, std::move(options));
}
Server& Server::websocket_factory(std::string prefix, WebSocketFactory factory,
                                  WebSocketOptions options) {
  std::string name = "route#" + std::to_string(impl_->routes.size());
  register_websocket(name, std::move(factory), std::move(options));
  impl_->routes.push_back({std::move(prefix), name, {}});
  return *this;
}
Server& Server::static_files(std::string prefix, std::string root) {
  impl_->routes.push_back({std::move(prefix), {}, std::move(root)});
  return *this;
}
Server& Server::config_file(std::string path) {
  impl_->config_file = std::move(path);
  return *this;
}
Server& Server::register_handler(std::string name, HandlerFactory factory) {
  impl_->registry[std::move(name)] = {std::move(factory), nullptr};
  return *this;
}
Server& Server::register_async_handler(std::string name, AsyncHandlerFactory factory) {
  impl_->registry[std::move(name)] = {nullptr, std::move(factory)};
  return *this;
}
Server& Server::register_websocket(std::string name, WebSocketFactory factory,
                                   WebSocketOptions options) {
  impl_->registry[std::move(name)] = {nullptr, nullptr, std::move(factory), std::move(options)};
  return *this;
}
Server& Server::handle_signals(bool enabled) {
  impl_->handle_signals = enabled;
  return *this;
}

int Server::run() {
  config::LoadResult loaded = impl_->build();
  if (!loaded.config) {
    for (const config::ConfigError& e : loaded.errors) LOG_ERROR("%s", e.to_string().c_str());
    return 1;
  }
  std::function<config::LoadResult()> reload;
  if (!impl_->config_file.empty()) reload = [this] { return impl_->build(); };
  server::ServerProcess process(loaded.config, impl_->registry, reload, impl_->handle_signals);
  {
    std::lock_guard lock(impl_->mutex);
    impl_->process = &process;
    if (impl_->early_stop) process.stop(impl_->early_stop == 1);
  }
  int status = process.run();
  std::lock_guard lock(impl_->mutex);
  impl_->process = nullptr;
  return status;
}

void Server::stop(bool graceful) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->process) {
    impl_->process->stop(graceful);
  } else {
    impl_->early_stop = graceful ? 1 : 2;
  }
}

}  // namespace peregrine
