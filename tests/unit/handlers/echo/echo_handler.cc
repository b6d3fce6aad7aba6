#include "unit/handlers/echo/echo_handler.h"

#include <memory>

#include "config/reader.h"
#include "handlers/builtin.h"

namespace peregrine::echo {

namespace {

const std::vector<std::string_view> kKeys = {"echo", "echo_status"};

class EchoHandler final : public Handler {
 public:
  explicit EchoHandler(const EchoOptions& options) : options_(options) {}
  void handle(const Request&, Response& response) override {
    response.set_status(options_.status);
    response.set_content_type("text/plain");
    response.set_body(options_.text);
  }

 private:
  const EchoOptions& options_;
};

class EchoType final : public handlers::HandlerType {
 public:
  EchoType() {
    name = "echo";
    keys = &kKeys;
    value_form = "\"TEXT\"";
    example = "e.g. echo = \"hello\"";
    foreign_hint = "add echo = \"TEXT\" to answer with TEXT";
    default_methods = "GET, HEAD";
  }

  std::optional<std::string_view> static_key(std::string_view) const override {
    return std::string_view("an echo route answers by itself");
  }

  void read(config::RouteContext& context, const toml::table& table, const toml::node& selector,
            config::Route* route) const override {
    auto options = std::make_shared<EchoOptions>();
    route->options = options;
    context.reader.read_string(selector, "site.route.echo", &options->text);
    if (const toml::node* node = table.get("echo_status")) {
      int64_t status = 200;
      if (context.reader.read_int(*node, "site.route.echo_status", 200, 599, &status))
        options->status = static_cast<int>(status);
    }
  }

  std::string describe(const config::Route& route) const override {
    return "\"" + route.options_as<EchoOptions>()->text + "\"";
  }

  std::optional<int> fixed_status(const config::Route& route) const override {
    return route.options_as<EchoOptions>()->status;
  }

  handlers::Runtime make(const handlers::BuildContext& context, std::string*) const override {
    return {std::make_shared<EchoHandler>(*context.route.options_as<EchoOptions>()), nullptr};
  }
};

}  // namespace

const handlers::HandlerType& echo_type() {
  static const EchoType type;
  return type;
}

const config::HandlerSet& with_echo() {
  static const config::HandlerSet kSet = [] {
    std::vector<const config::HandlerType*> types = handlers::builtin().types();
    types.push_back(&echo_type());
    return config::HandlerSet(std::move(types));
  }();
  return kSet;
}

}  // namespace peregrine::echo
