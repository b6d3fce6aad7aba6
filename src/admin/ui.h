// The admin web UI: one page (src/admin/ui/index.html) and its script and style sheet, embedded
// in the binary at build time (cmake/embed_files.cmake writes kUiAssets), served by the admin
// listener without credentials: the page holds no secret, and every figure it shows comes from
// the API, which asks for them.
#pragma once

#include <cstddef>
#include <string_view>

#include "peregrine/handler.h"

namespace peregrine::admin {

struct UiAsset {
  std::string_view path;  // "/index.html", "/ui.js", ...
  std::string_view content_type;
  std::string_view etag;  // quoted, from the file's SHA-256
  std::string_view body;
};

extern const UiAsset kUiAssets[];
extern const size_t kUiAssetCount;

// The asset a GET of `path` names: "/" is the page, "/ui.*" its files; nullptr for any other.
const UiAsset* find_ui_asset(std::string_view path);

// The Content-Security-Policy of every UI answer: scripts, styles and API calls from the admin's
// own origin only, no inline script or style, no framing, no plugins, no form posts elsewhere.
inline constexpr std::string_view kUiContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// Answers a GET or HEAD of a UI path (200, or 304 for a matching If-None-Match) and returns
// true; returns false, leaving `response` untouched, for any other request.
bool serve_ui(const Request& request, Response& response);

}  // namespace peregrine::admin
