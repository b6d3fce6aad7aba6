// `return` routes: a fixed status with an optional body, or a redirect whose Location may use
// the route's regex captures ($1..$9), the request path ($uri), the path and query as sent
// ($request_uri) and the host ($host).
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "handlers/return/options.h"
#include "peregrine/handler.h"

namespace peregrine::return_route {

class ReturnHandler final : public Handler {
 public:
  ReturnHandler(const ReturnOptions& options, std::shared_ptr<const Regex> regex);
  void handle(const Request& request, Response& response) override;

  // Expands $1..$9 (from `captures`), $uri, $request_uri (the path and query as the client sent
  // them) and $host (the Host header without its port, lower-case) in `pattern`. Pure; exposed
  // for tests.
  static std::string expand(std::string_view pattern, const Regex::Captures& captures,
                            std::string_view uri, std::string_view request_uri = {},
                            std::string_view host = {});

 private:
  ReturnOptions options_;
  std::shared_ptr<const Regex> regex_;
  bool location_has_variables_;
  std::string content_type_line_;  // prebuilt "Content-Type: ...\r\n"
};

}  // namespace peregrine::return_route
