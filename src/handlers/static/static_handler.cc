#include "handlers/static/static_handler.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "compress/decision.h"
#include "compress/encoder.h"
#include "core/strings.h"
#include "handlers/static/mime.h"
#include "http/accept_encoding.h"
#include "http/conditional.h"
#include "http/http_date.h"
#include "http/path.h"
#include "http/range.h"

namespace peregrine::static_files {
namespace {

// The request headers the static handler reads, found in one pass.
struct StaticRequestHeaders {
  http::ConditionalHeaders conditional;
  std::optional<std::string_view> range, if_range, accept_encoding;

  explicit StaticRequestHeaders(const Request& request) {
    for (const Header& h : request.header_list()) {
      std::string_view n = h.name;
      switch (n.size()) {
        case 5:
          if (ascii_iequals(n, "range")) range = h.value;
          break;
        case 8:
          if (ascii_iequals(n, "if-match"))
            conditional.if_match = h.value;
          else if (ascii_iequals(n, "if-range"))
            if_range = h.value;
          break;
        case 13:
          if (ascii_iequals(n, "if-none-match")) conditional.if_none_match = h.value;
          break;
        case 15:
          if (ascii_iequals(n, "accept-encoding")) accept_encoding = h.value;
          break;
        case 17:
          if (ascii_iequals(n, "if-modified-since")) conditional.if_modified_since = h.value;
          break;
        case 19:
          if (ascii_iequals(n, "if-unmodified-since")) conditional.if_unmodified_since = h.value;
          break;
        default:
          break;
      }
    }
  }
};

void append_slice(Response& response, const CachedFile& file, uint64_t offset, uint64_t length) {
  if (file.inline_content) {
    response.append_borrowed_body(std::string_view(file.content).substr(offset, length));
  } else {
    response.append_file(file.file, static_cast<off_t>(offset), length);
  }
}

// Compressed variants kept per handler per worker, and the largest file compressed on the fly:
// beyond it a file goes out as it is (with sendfile), since compressing megabytes in the event
// loop would stall every other connection of the worker.
constexpr size_t kVariantBudget = 16 * 1024 * 1024;
constexpr uint64_t kMaxVariantSource = 4 * 1024 * 1024;

// The ETag of a compressed variant: the file's with the coding appended, so a cache never takes
// one representation's bytes for the other's.
void variant_etag(std::string_view etag, compress::Coding coding, std::string& out) {
  out.clear();
  if (etag.size() < 2 || etag.back() != '"') return;
  out.append(etag.substr(0, etag.size() - 1))
      .append("-")
      .append(compress::coding_name(coding))
      .append("\"");
}

// 304 or 412 when the request's conditions say so (RFC 9110 section 13.2.2), for a file and
// for its compressed variants alike; false: serve the representation.
bool answered_by_preconditions(const http::ConditionalHeaders& conditional,
                               const http::Validators& validators, std::string_view validator_lines,
                               Response& response) {
  switch (http::evaluate_preconditions(conditional, validators, true)) {
    case http::Precondition::kNotModified:
      response.set_status(304);
      response.set_prebuilt_headers(validator_lines);
      return true;
    case http::Precondition::kFailed:
      response.set_status(412);
      return true;
    case http::Precondition::kProceed:
      break;
  }
  return false;
}

void append_percent_encoded(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : text) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.' || c == '~' || c == '/';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
}

}  // namespace

StaticHandler::StaticHandler(const config::StaticOptions& options, std::string strip_prefix,
                             const MimeTable& mime, const Clock& clock,
                             const compress::Options& compress)
    : options_(options),
      compress_(compress),
      strip_prefix_(std::move(strip_prefix)),
      clock_(clock),
      cache_(root_, mime,
             CacheOptions{.etag = options.etag,
                          .precompressed = options.precompressed,
                          .valid_ms = options.cache_valid.count(),
                          .compress = &compress_}),
      variants_(kVariantBudget) {
  root_.path = options.root;
  while (root_.path.size() > 1 && root_.path.back() == '/') root_.path.pop_back();
  root_.symlinks_outside = options.symlinks_outside_root;
  root_.dir_fd = ::open(root_.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

StaticHandler::~StaticHandler() {
  if (root_.dir_fd >= 0) ::close(root_.dir_fd);
}

void StaticHandler::handle(const Request& request, Response& response) {
  switch (request.method) {
    case Method::kGet:
    case Method::kHead:
      break;
    case Method::kOptions:
      response.set_status(204);
      response.add_header("Allow", "GET, HEAD, OPTIONS");
      return;
    default:
      response.set_status(405);
      response.add_header("Allow", "GET, HEAD, OPTIONS");
      return;
  }
  std::string_view path = request.path;
  if (!strip_prefix_.empty()) {
    // An alias replaces the matched prefix; what remains is looked up beneath the alias root.
    path.remove_prefix(std::min(strip_prefix_.size(), path.size()));
    if (path.empty() || path.front() != '/') {
      scratch_.assign("/").append(path);
      path = scratch_;
    }
  }
  if (!options_.dotfiles && http::path_should_deny_dotfile(path)) {
    response.set_status(403);
    return;
  }
  Ref<CachedFile> entry = cache_.lookup(path, clock_.monotonic_ms);
  switch (entry->kind) {
    case CachedFile::Kind::kFile:
      serve_file(request, response, *entry, path);
      return;
    case CachedFile::Kind::kDirectory: {
      std::string dir(path);  // scratch_ may hold `path`; serve_directory reuses scratch_
      serve_directory(request, response, dir);
      return;
    }
    case CachedFile::Kind::kMissing:
      response.set_status(404);
      return;
    case CachedFile::Kind::kForbidden:
      response.set_status(403);
      return;
  }
}

void StaticHandler::serve_directory(const Request& request, Response& response,
                                    std::string_view path) {
  if (path.back() != '/') {
    std::string location(request.raw_path);
    location += '/';
    if (!request.query.empty()) location.append("?").append(request.query);
    response.set_status(301);
    response.add_header("Location", location);
    return;
  }
  for (const std::string& index : options_.index) {
    scratch_.assign(path).append(index);
    Ref<CachedFile> entry = cache_.lookup(scratch_, clock_.monotonic_ms);
    if (entry->kind == CachedFile::Kind::kFile) {
      serve_file(request, response, *entry, scratch_);
      return;
    }
  }
  if (options_.directory_listing) {
    list_directory(response, path);
    return;
  }
  response.set_status(403);
}

void StaticHandler::serve_file(const Request& request, Response& response,
                               const CachedFile& original, std::string_view path) {
  StaticRequestHeaders headers(request);
  const CachedFile* file = &original;
  if (headers.accept_encoding && (original.brotli || original.gzip)) {
    http::AcceptedEncodings accepted = http::parse_accept_encoding(*headers.accept_encoding);
    if (accepted.br && original.brotli)
      file = original.brotli.get();
    else if (accepted.gzip && original.gzip)
      file = original.gzip.get();
  }
  // No precompressed sibling for this client: a cached compressed variant, unless the request
  // asks for a range (ranges are of the identity) or only the head (HEAD).
  if (file == &original && original.compressible && headers.accept_encoding && !headers.range &&
      request.method == Method::kGet) {
    const compress::Coding coding = compress::negotiate(&*headers.accept_encoding, compress_);
    if (coding != compress::Coding::kIdentity) {
      if (Ref<Variant> variant = variant_for(original, coding)) {
        http::Validators validators{variant->etag, original.mtime};
        if (answered_by_preconditions(headers.conditional, validators, variant->validator_lines(),
                                      response))
          return;
        // The variant stays alive in the cache until this request's bytes are queued: nothing
        // else runs on this worker before the connection copies borrowed bytes.
        response.set_status(200);
        response.set_prebuilt_headers(variant->headers);
        response.append_borrowed_body(variant->body);
        return;
      }
    }
  }

  http::Validators validators{file->etag, file->mtime};
  if (answered_by_preconditions(headers.conditional, validators, file->validator_lines(), response))
    return;

  if (headers.range && request.method == Method::kGet &&
      (!headers.if_range || http::if_range_matches(*headers.if_range, validators))) {
    http::RangeSet ranges = http::parse_range(*headers.range, file->size);
    char content_range[96];
    if (ranges.status == http::RangeStatus::kUnsatisfiable) {
      size_t n = http::format_unsatisfied_range(file->size, content_range, sizeof content_range);
      response.set_status(416);
      response.add_header("Content-Range", std::string_view(content_range, n));
      return;
    }
    if (ranges.status == http::RangeStatus::kSatisfiable && ranges.count == 1) {
      const http::ByteRange& r = ranges.ranges[0];
      size_t n = http::format_content_range(r, file->size, content_range, sizeof content_range);
      response.set_status(206);
      response.set_prebuilt_headers(file->headers);
      response.add_header("Content-Range", std::string_view(content_range, n));
      append_slice(response, *file, r.first, r.last - r.first + 1);
      return;
    }
    if (ranges.status == http::RangeStatus::kSatisfiable) {
      // multipart/byteranges (RFC 9110 14.6): each part names its range and the media type.
      char boundary[33];
      uint64_t random[2] = {0, 0};
      if (getrandom(random, sizeof random, GRND_NONBLOCK) < 0)
        random[0] = static_cast<uint64_t>(clock_.monotonic_ms);
      std::snprintf(boundary, sizeof boundary, "%016llx%016llx",
                    static_cast<unsigned long long>(random[0]),
                    static_cast<unsigned long long>(random[1]));
      response.set_status(206);
      response.set_prebuilt_headers(file->validator_lines());
      response.add_header("Content-Type",
                          std::string("multipart/byteranges; boundary=") + boundary);
      std::string part;
      for (size_t i = 0; i < ranges.count; ++i) {
        const http::ByteRange& r = ranges.ranges[i];
        size_t n = http::format_content_range(r, file->size, content_range, sizeof content_range);
        part.assign("\r\n--")
            .append(boundary)
            .append("\r\nContent-Type: ")
            .append(file->content_type);
        part.append("\r\nContent-Range: ").append(content_range, n).append("\r\n\r\n");
        response.append_body(part);
        append_slice(response, *file, r.first, r.last - r.first + 1);
      }
      part.assign("\r\n--").append(boundary).append("--\r\n");
      response.append_body(part);
      return;
    }
  }

  response.set_status(200);
  response.set_prebuilt_headers(file->headers);
  append_slice(response, *file, 0, file->size);
}

Ref<Variant> StaticHandler::variant_for(const CachedFile& file, compress::Coding coding) {
  const VariantKey key{file.dev, file.ino, coding, compress_.level_for(coding)};
  if (Ref<Variant> found = variants_.find(key, file.size, file.mtime_ns)) return found;
  if (file.size > kMaxVariantSource || file.size > variants_.max_bytes()) return {};
  std::string_view source;
  std::string read;  // once per file and coding: not worth a kept buffer
  if (file.inline_content) {
    source = file.content;
  } else {
    if (!file.file || !read_whole(file.file->fd(), read, file.size)) return {};
    source = read;
  }
  Ref<Variant> v(new Variant);
  v->source_size = file.size;
  v->source_mtime_ns = file.mtime_ns;
  if (!compress::compress_all(coding, key.level, source, &v->body)) return {};
  variant_etag(file.etag, coding, v->etag);
  std::string& h = v->headers;
  h.append("Content-Type: ").append(file.content_type).append("\r\n");
  h.append("Content-Encoding: ").append(compress::coding_name(coding)).append("\r\n");
  v->validators_offset = h.size();
  // The file's own validator lines, with the variant's ETag in place of the file's and no
  // Accept-Ranges (ranges are served from the identity only).
  std::string_view lines = file.validator_lines();
  while (!lines.empty()) {
    const size_t end = lines.find("\r\n");
    const std::string_view line = lines.substr(0, end == std::string_view::npos ? end : end + 2);
    lines.remove_prefix(line.size());
    if (line.starts_with("ETag: ")) {
      if (!v->etag.empty()) h.append("ETag: ").append(v->etag).append("\r\n");
    } else if (!line.starts_with("Accept-Ranges: ")) {
      h.append(line);
    }
  }
  variants_.insert(key, v);
  return v;
}

bool StaticHandler::serve_error_page(std::string_view path, int status, const Request& request,
                                     Response& response) {
  Ref<CachedFile> entry = cache_.lookup(path, clock_.monotonic_ms);
  if (entry->kind != CachedFile::Kind::kFile) return false;
  response.set_status(status);
  response.set_prebuilt_headers(entry->representation_lines());
  append_slice(response, *entry, 0, entry->size);
  return true;
}

void StaticHandler::list_directory(Response& response, std::string_view path) {
  int fd = cache_.open_beneath(path, O_RDONLY | O_DIRECTORY);
  DIR* dir = fd >= 0 ? fdopendir(fd) : nullptr;
  if (!dir) {
    if (fd >= 0) ::close(fd);
    response.set_status(403);
    return;
  }
  struct Item {
    std::string name;
    bool is_dir;
    off_t size;
    time_t mtime;
  };
  std::vector<Item> items;
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!options_.dotfiles && name.front() == '.') continue;
    struct stat st;
    if (fstatat(dirfd(dir), e->d_name, &st, 0) != 0) continue;
    items.push_back({std::string(name), S_ISDIR(st.st_mode), st.st_size, st.st_mtim.tv_sec});
  }
  closedir(dir);
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.is_dir != b.is_dir) return a.is_dir;
    return a.name < b.name;
  });

  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ";
  append_html_escaped(html, path);
  html +=
      "</title><style>body{font-family:sans-serif;margin:2em}td{padding:0 1em}"
      "td:nth-child(2){text-align:right}</style></head><body><h1>Index of ";
  append_html_escaped(html, path);
  html += "</h1><table><tr><th>Name</th><th>Size</th><th>Modified</th></tr>\n";
  if (path != "/") html += "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n";
  for (const Item& item : items) {
    std::string href;
    append_percent_encoded(href, item.name);
    if (item.is_dir) href += '/';
    html += "<tr><td><a href=\"";
    append_html_escaped(html, href);
    html += "\">";
    append_html_escaped(html, item.name);
    if (item.is_dir) html += '/';
    html += "</a></td><td>";
    html += item.is_dir ? "-" : std::to_string(item.size);
    char date[32];
    size_t n = http::format_http_date(item.mtime, date);
    html.append("</td><td>").append(date, n).append("</td></tr>\n");
  }
  html += "</table></body></html>\n";
  response.set_status(200);
  response.set_content_type("text/html; charset=utf-8");
  response.set_body(html);
}

}  // namespace peregrine::static_files
