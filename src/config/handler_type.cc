#include "config/handler_type.h"

#include "config/registry.h"
#include "config/static_options.h"

namespace peregrine::config {

HandlerSet::HandlerSet(std::vector<const HandlerType*> types) : types_(std::move(types)) {
  for (const HandlerType* type : types_) {
    if (type->selection == HandlerType::Selection::kDefault) default_ = type;
    if (type->selection == HandlerType::Selection::kNamed) named_ = type;
  }
  // The match keys, the first keyed handler's keys (return's: a route that answers by itself),
  // `handler`, the static options, the common keys, then the other handlers' keys.
  route_keys_ = {"exact", "prefix", "extension", "regex"};
  auto add_keys = [&](const HandlerType* type) {
    if (type->keys != nullptr)
      route_keys_.insert(route_keys_.end(), type->keys->begin(), type->keys->end());
  };
  const HandlerType* leading = nullptr;
  for (const HandlerType* type : types_) {
    if (leading == nullptr && type->keys != nullptr && !type->keys->empty()) leading = type;
  }
  if (leading != nullptr) add_keys(leading);
  for (std::string_view key : common_route_keys()) {
    if (key == "exact" || key == "prefix" || key == "extension" || key == "regex") continue;
    route_keys_.push_back(key);
  }
  for (const HandlerType* type : types_) {
    if (type != leading) add_keys(type);
  }
}

const HandlerType* HandlerSet::find(std::string_view name) const {
  for (const HandlerType* type : types_)
    if (type->name == name) return type;
  return nullptr;
}

size_t HandlerSet::rank(std::string_view name) const {
  for (size_t i = 0; i < types_.size(); ++i)
    if (types_[i]->name == name) return i;
  return types_.size();
}

}  // namespace peregrine::config
