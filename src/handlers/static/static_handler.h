// Serves files beneath a root: index files, conditional and range requests, precompressed
// siblings, optional directory listings. One instance per route per worker, each with its own
// file cache, so nothing here is shared between threads.
#pragma once

#include <memory>
#include <string>

#include "compress/options.h"
#include "config/config.h"
#include "core/clock.h"
#include "handlers/static/file_cache.h"
#include "handlers/static/variant_cache.h"
#include "peregrine/handler.h"

namespace peregrine::static_files {

class MimeTable;

class StaticHandler final : public Handler {
 public:
  // `strip_prefix` is the route's prefix when options.alias is set (it is replaced by the root).
  // `compress`: the route's on-the-fly compression; compressed variants of files are cached.
  StaticHandler(const config::StaticOptions& options, std::string strip_prefix,
                const MimeTable& mime, const Clock& clock,
                const compress::Options& compress = compress::Options{});
  ~StaticHandler() override;
  // False when the root could not be opened (a reload race: it vanished after validation).
  bool ok() const { return root_.dir_fd >= 0; }

  void handle(const Request& request, Response& response) override;

  // Fills `response` with the file at `path` (under this root) and the given status, for custom
  // error pages. Returns false when there is no such regular file.
  bool serve_error_page(std::string_view path, int status, const Request& request,
                        Response& response);

 private:
  void serve_file(const Request& request, Response& response, const CachedFile& file,
                  std::string_view path);
  void serve_directory(const Request& request, Response& response, std::string_view path);
  void list_directory(Response& response, std::string_view path);
  // The cached compressed variant of `file` in `coding`, made now if missing; null when it
  // cannot be made (too large, unreadable).
  Ref<Variant> variant_for(const CachedFile& file, compress::Coding coding);

  config::StaticOptions options_;
  compress::Options compress_;
  std::string strip_prefix_;
  const Clock& clock_;
  Root root_;
  FileCache cache_;
  VariantCache variants_;
  std::string scratch_;  // reused for index-file paths
};

}  // namespace peregrine::static_files
