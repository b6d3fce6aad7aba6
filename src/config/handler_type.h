// What the configuration knows about a route's handler: its name, how a route selects it, the
// route keys it owns and its reader, how it uses [[upstream]] groups, its default methods and what
// the admin API shows about its routes. A Route holds its handler's type and its options
// type-erased, so that config/ names no handler: each handler derives its options and its type in
// its own folder (src/handlers/NAME/), and adds the factory that makes its runtime
// (handlers/handler_type.h). The list of handlers a load knows (a HandlerSet) is assembled above
// both layers (handlers/builtin.h) and passed down to load_file, load_string and build_config.
#pragma once

#include <toml++/toml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine::upstream {
class RouteGroups;
}

namespace peregrine::access {
struct Definitions;
}

namespace peregrine::config {

class Reader;
struct Route;
struct Site;
struct UpstreamGroup;

// A handler's own route options (handlers/NAME/options.h derives from this). Immutable once read.
struct HandlerOptions {
  virtual ~HandlerOptions() = default;
};

// What a handler's reader gets besides its route's table.
struct RouteContext {
  Reader& reader;
  const Site& site;                             // the route's site (its root and static defaults)
  upstream::RouteGroups& groups;                // upstream groups, for the routes that name one
  const access::Definitions* limits = nullptr;  // the [[limit]]s routes may name
  size_t errors_before = 0;  // the reader's error count before this route: later checks that
                             // only make sense on an otherwise valid route compare with it
};

// How a handler's routes use [[upstream]] groups (upstream::RouteGroups::resolve).
struct UpstreamUse {
  // The protocol the group speaks, in messages ("fastcgi"): a group speaks one, so two handlers
  // with different protocols cannot share one.
  std::string_view protocol;
  // As a sentence names it: "FastCGI", "AJP".
  std::string_view display_name;
  // The scheme says whether the group is reached over TLS (proxy: https://); otherwise a group
  // with tls = true is refused.
  bool tls_by_scheme = false;
  // The group's [upstream.health_check] applies (after `adapt`, which may change how it probes).
  bool health_check = false;
  // "; or write an address: ..." for a group name nobody declared.
  std::string_view address_hint;
  // Adjusts a group this protocol uses (FastCGI's keep-alive defaults, AJP's CPING probe).
  void (*adapt)(UpstreamGroup& group) = nullptr;
};

class HandlerType {
 public:
  enum class Selection {
    kKey,           // its selecting key (`name`) is set on the route: proxy = "URL"
    kKeyOrHandler,  // the same, and handler = "NAME" is accepted as a synonym (return)
    kDefault,       // no selecting key and no handler, or handler = "NAME" (static)
    kNamed,         // handler = "ANY OTHER NAME" (an embedding program's handler)
  };

  // Registrations are static objects: a Route points at its type for as long as the program runs.
  HandlerType() = default;
  HandlerType(const HandlerType&) = delete;
  HandlerType& operator=(const HandlerType&) = delete;
  virtual ~HandlerType() = default;

  // Its name in messages, in handler = "NAME" and in the admin API; the selecting key for kKey
  // and kKeyOrHandler.
  std::string_view name;
  Selection selection = Selection::kKey;
  // The route keys it owns, the selecting key first (none for kDefault and kNamed).
  const std::vector<std::string_view>* keys = nullptr;
  std::string_view value_form;    // how the selecting key's value is written: "\"URL\""
  std::string_view example;       // "e.g. proxy = \"http://127.0.0.1:8080\""
  std::string_view foreign_hint;  // when its keys appear on another handler's route
  // What a route that lists no `methods` takes: an Allow value, answered 405 with it to a method
  // outside it; "" passes any method token on (the handler decides).
  std::string_view default_methods;
  const UpstreamUse* upstream = nullptr;  // null: its routes use no [[upstream]] group

  // For a static option (or `alias`) on its route: nullopt when it uses the option, else the
  // hint for "'KEY' does not apply to a 'NAME' route" (possibly empty).
  virtual std::optional<std::string_view> static_key(std::string_view key) const = 0;
  // Reads its keys into route->options (route->static_files already holds the site's defaults
  // overridden by the route's static options, and route->type is this). `selector` is the
  // selecting key's value, the `handler` value, or the route's table. Errors go to
  // context.reader.
  virtual void read(RouteContext& context, const toml::table& table, const toml::node& selector,
                    Route* route) const = 0;
  // What GET /api/routes shows as the route's target: a root, a group, a status.
  virtual std::string describe(const Route& route) const = 0;
  // The status every request the route takes is answered with, when the configuration alone
  // says (GET /api/route-test); nullopt when the handler decides as it runs.
  virtual std::optional<int> fixed_status(const Route&) const { return std::nullopt; }
};

// The handlers a load knows, in precedence order: when several selecting keys are set on a route,
// the first one's handler is used (after an error). Exactly one kDefault and at most one kNamed.
class HandlerSet {
 public:
  HandlerSet() = default;
  explicit HandlerSet(std::vector<const HandlerType*> types);

  const std::vector<const HandlerType*>& types() const { return types_; }
  const HandlerType* find(std::string_view name) const;
  const HandlerType* default_type() const { return default_; }  // static files
  const HandlerType* named_type() const { return named_; }      // null: handler = "NAME" unknown
  // Where `type` stands in the precedence order (types().size() when absent).
  size_t rank(std::string_view name) const;
  // Every route key: the match keys, then the common ones and the handlers' own, in the order of
  // docs/configuration.md, which "valid keys: ..." hints follow.
  const std::vector<std::string_view>& route_keys() const { return route_keys_; }

 private:
  std::vector<const HandlerType*> types_;
  const HandlerType* default_ = nullptr;
  const HandlerType* named_ = nullptr;
  std::vector<std::string_view> route_keys_;
};

}  // namespace peregrine::config
