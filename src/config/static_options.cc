#include "config/static_options.h"

#include "config/validate.h"

namespace peregrine::config {

namespace {

const std::vector<std::string_view> kOptionKeys = {
    "root",          "index", "directory_listing", "dotfiles", "symlinks_outside_root",
    "precompressed", "etag",  "cache_valid"};

void read_alias(config::RouteContext& context, const toml::table& table, const toml::node& node,
                const config::HandlerType* handler, std::string_view match_key,
                config::Route* route) {
  config::Reader& reader = context.reader;
  if (handler != nullptr) {
    if (std::optional<std::string_view> hint = handler->static_key("alias")) {
      reader.error(node.source(),
                   "'alias' does not apply to a '" + std::string(handler->name) + "' route",
                   std::string(*hint));
      return;
    }
  }
  std::string value, problem;
  if (!match_key.empty() && match_key != "prefix") {
    reader.error(node.source(), "'alias' needs a prefix route",
                 "alias replaces the matched prefix; write prefix = \"/dir/\" instead of '" +
                     std::string(match_key) + "'");
  } else if (table.get("root") != nullptr) {
    reader.error(node.source(), "'alias' and 'root' cannot both be set on a route",
                 "root maps the whole path under a directory; alias replaces the matched prefix");
  } else if (reader.read_string(node, "site.route.alias", &value, false)) {
    if (config::detail::resolve_directory(value, reader.base_dir(), &route->static_files.root,
                                          &problem)) {
      route->static_files.alias = true;
    } else {
      reader.error(node.source(), "alias \"" + value + "\" " + problem,
                   reader.relative_hint(value));
    }
  }
}

}  // namespace

const std::vector<std::string_view>& static_option_keys() {
  return kOptionKeys;
}

void read_static_option(config::Reader& reader, const toml::table& table, std::string_view key,
                        std::string_view prefix, config::StaticOptions* options) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return;
  std::string name = std::string(prefix) + std::string(key);
  if (key == "root") {
    std::string value, problem;
    if (!reader.read_string(*node, name, &value, false)) return;
    if (config::detail::resolve_directory(value, reader.base_dir(), &options->root, &problem)) {
      options->alias = false;
    } else {
      reader.error(node->source(), "root \"" + value + "\" " + problem,
                   reader.relative_hint(value));
    }
  } else if (key == "index") {
    std::vector<std::pair<std::string, const toml::node*>> names;
    if (!reader.read_string_list(*node, name, &names)) return;
    std::vector<std::string> index;
    for (auto& [file, element] : names) {
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        reader.error(element->source(), "invalid index file name \"" + file + "\"",
                     "index entries are file names such as \"index.html\", without a '/'");
        continue;
      }
      index.push_back(file);
    }
    options->index = std::move(index);
  } else if (key == "directory_listing") {
    reader.read_bool(*node, name, &options->directory_listing);
  } else if (key == "dotfiles") {
    reader.read_bool(*node, name, &options->dotfiles);
  } else if (key == "symlinks_outside_root") {
    reader.read_bool(*node, name, &options->symlinks_outside_root);
  } else if (key == "precompressed") {
    reader.read_bool(*node, name, &options->precompressed);
  } else if (key == "etag") {
    reader.read_bool(*node, name, &options->etag);
  } else if (key == "cache_valid") {
    reader.read_duration(*node, name, config::Millis(0), config::kMaxDuration,
                         &options->cache_valid);
  }
}

void read_static_route_options(config::RouteContext& context, const toml::table& table,
                               const config::HandlerType* handler, std::string_view match_key,
                               config::Route* route) {
  route->static_files = context.site.static_files;
  for (std::string_view key : kOptionKeys) {
    const toml::node* node = table.get(key);
    if (node == nullptr) continue;
    if (handler != nullptr) {
      if (std::optional<std::string_view> hint = handler->static_key(key)) {
        context.reader.error(node->source(),
                             "'" + std::string(key) + "' does not apply to a '" +
                                 std::string(handler->name) + "' route",
                             std::string(*hint));
        continue;
      }
    }
    read_static_option(context.reader, table, key, "site.route.", &route->static_files);
  }
  if (const toml::node* node = table.get("alias")) {
    read_alias(context, table, *node, handler, match_key, route);
  }
}

}  // namespace peregrine::config
