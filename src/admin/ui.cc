#include "admin/ui.h"

#include "http/conditional.h"

namespace peregrine::admin {

const UiAsset* find_ui_asset(std::string_view path) {
  if (path == "/")
    path = "/index.html";
  else if (!path.starts_with("/ui."))
    return nullptr;
  for (size_t i = 0; i < kUiAssetCount; ++i)
    if (kUiAssets[i].path == path) return &kUiAssets[i];
  return nullptr;
}

bool serve_ui(const Request& request, Response& response) {
  if (request.method != Method::kGet && request.method != Method::kHead) return false;
  const UiAsset* asset = find_ui_asset(request.path);
  if (!asset) return false;
  response.add_header("Content-Security-Policy", kUiContentSecurityPolicy);
  response.add_header("X-Content-Type-Options", "nosniff");
  response.add_header("Referrer-Policy", "no-referrer");
  response.add_header("X-Frame-Options", "DENY");
  // Revalidated on every load: the ETag changes with the binary's copy of the file, so a new
  // build's page never runs beside an old cached script.
  response.add_header("Cache-Control", "no-cache");
  response.add_header("ETag", asset->etag);
  http::ConditionalHeaders conditions;
  conditions.if_none_match = request.header("If-None-Match");
  // No Last-Modified: the build time would say nothing the ETag does not.
  if (http::evaluate_preconditions(conditions, {asset->etag, 0}, true) ==
      http::Precondition::kNotModified) {
    response.set_status(304);
    return true;
  }
  response.set_status(200);
  response.set_content_type(asset->content_type);
  response.append_borrowed_body(asset->body);  // static storage: outlives any response
  return true;
}

}  // namespace peregrine::admin
