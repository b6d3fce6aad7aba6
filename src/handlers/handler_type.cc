#include "handlers/handler_type.h"

namespace peregrine::handlers {

upstream::GroupRuntime* BuildContext::group(std::string_view name, std::string* error) const {
  upstream::GroupRuntime* found = find_group ? find_group(name) : nullptr;
  if (found == nullptr) *error = position() + ": no upstream named '" + std::string(name) + "'";
  return found;
}

std::string BuildContext::position() const {
  return route.pos.file + ":" + std::to_string(route.pos.line) + ":" +
         std::to_string(route.pos.column);
}

}  // namespace peregrine::handlers
