// File extension -> Content-Type for the static-file handler.
//
// Charset policy: "; charset=utf-8" is part of the type for every text/* type and for the textual
// types browsers and feed readers decode themselves: the JSON family (json, map, jsonld,
// webmanifest, geojson), the XML family they render (atom, rss, xhtml, xsl/xslt, svg — but not
// svgz, which is gzip bytes), yaml and toml. UTF-8 is mandated (JSON) or near-universal on the
// web for these, and without the parameter browsers guess (windows-1252 for text/plain). A site
// that serves other encodings overrides the type per extension with MimeTable.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace peregrine::static_files {

inline constexpr std::string_view kDefaultMimeType = "application/octet-stream";

// The built-in type for an extension given without its dot, matched case-insensitively ("JPG" ->
// "image/jpeg"). Unknown or empty -> kDefaultMimeType. No allocation; the view is static storage.
std::string_view mime_type_for_extension(std::string_view ext_without_dot);

// The built-in table plus per-site overrides, built once at configuration time.
class MimeTable {
 public:
  // `overrides` maps extension (without dot; matched case-insensitively, a leading '.' is
  // dropped) to the full Content-Type value; they take precedence over the built-in table. Keys
  // that are empty or longer than 64 bytes are ignored (config validation should reject them).
  explicit MimeTable(const std::map<std::string, std::string>& overrides = {});

  // Override, else built-in, else kDefaultMimeType. No allocation. The view stays valid as long
  // as this table or any copy of it lives (copies share the override storage).
  std::string_view lookup(std::string_view ext) const;

 private:
  struct Overrides;
  std::shared_ptr<const Overrides> overrides_;  // null when there are none
};

}  // namespace peregrine::static_files
