#include "handlers/proxy/request_head.h"

#include <optional>

#include "core/strings.h"

namespace peregrine::proxy {
namespace {

// Percent-encodes what may not appear raw in a request-target path.
std::string encode_path(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size());
  for (char ch : path) {
    auto c = static_cast<unsigned char>(ch);
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("-._~/!$&'()*+,;=:@").find(ch) != std::string_view::npos;
    if (safe) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Does a path segment read "." or ".." once %2e is decoded (RFC 3986 5.2.4)?
bool has_dot_segment(std::string_view path) {
  while (!path.empty()) {
    const size_t slash = path.find('/');
    std::string_view segment = path.substr(0, slash);
    size_t dots = 0;
    bool only_dots = true;
    while (!segment.empty() && only_dots) {
      if (segment[0] == '.') {
        segment.remove_prefix(1);
      } else if (segment.size() >= 3 && segment[0] == '%' && segment[1] == '2' &&
                 (segment[2] == 'e' || segment[2] == 'E')) {
        segment.remove_prefix(3);
      } else {
        only_dots = false;
        break;
      }
      ++dots;
    }
    if (only_dots && (dots == 1 || dots == 2)) return true;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return false;
}

}  // namespace

void append_request_head(std::string& out, const Request& request, const PathMapping& mapping,
                         const RequestContext& context, const RequestOptions& options,
                         std::vector<HeaderView>& scratch) {
  scratch.clear();
  for (const peregrine::Header& h : request.header_list()) {
    // We frame the body ourselves; 100-continue is the client connection's business.
    if (ascii_iequals(h.name, "Content-Length") || ascii_iequals(h.name, "Expect")) continue;
    scratch.push_back({h.name, h.value});
  }

  std::string_view raw_path = request.raw_path.empty() ? std::string_view("/") : request.raw_path;
  out.append(request.method_text);
  out += ' ';
  if (mapping.enabled) {
    // The raw path keeps the client's spelling, unless its dot-segments would climb out of the
    // replacement once the back end resolves them ("/api/../api/x" mapped to "/v1/../api/x"):
    // then the normalized path the route matched is what is mapped.
    std::optional<std::string> mapped;
    if (!has_dot_segment(raw_path))
      mapped = map_path(raw_path, mapping.prefix, mapping.replacement);
    if (!mapped) {
      // The route matched the normalized path; the raw one spells it differently.
      mapped = map_path(request.path, mapping.prefix, mapping.replacement);
      if (mapped) mapped = encode_path(*mapped);
    }
    out.append(mapped ? *mapped : raw_path);
  } else {
    out.append(raw_path);
  }
  if (!request.query.empty()) {
    out += '?';
    out.append(request.query);
  }
  out.append(" HTTP/1.1\r\n");
  if (!append_request_headers_fast(out, scratch, context, options))
    append_header_block(out, rewrite_request_headers(scratch, context, options));
  if (request.chunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  } else if (request.content_length >= 0) {
    out.append("Content-Length: ");
    append_decimal(out, static_cast<unsigned long long>(request.content_length));
    out.append("\r\n");
  }
  if (!context.tunnel) out.append("Connection: keep-alive\r\n");
  out.append("\r\n");
}

}  // namespace peregrine::proxy
