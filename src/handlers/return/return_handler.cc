#include "handlers/return/return_handler.h"

#include "http/router.h"

namespace peregrine::return_route {
namespace {

// Captures come from the decoded path, so they may hold spaces, control bytes or UTF-8:
// re-encode those so the Location header is always a valid URI reference.
void append_uri_safe(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' ||
        c == '`' || c == '{' || c == '|' || c == '}') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

}  // namespace

ReturnHandler::ReturnHandler(const ReturnOptions& options, std::shared_ptr<const Regex> regex)
    : options_(options),
      regex_(std::move(regex)),
      location_has_variables_(options.location.find('$') != std::string::npos) {
  if (!options_.body.empty() || options_.location.empty())
    content_type_line_ = "Content-Type: " + options_.content_type + "\r\n";
}

std::string ReturnHandler::expand(std::string_view pattern, const Regex::Captures& captures,
                                  std::string_view uri, std::string_view request_uri,
                                  std::string_view host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '$' && i + 1 < pattern.size() && pattern[i + 1] >= '0' && pattern[i + 1] <= '9') {
      int group = pattern[i + 1] - '0';
      if (group < captures.count) append_uri_safe(out, captures.group[group]);
      ++i;
    } else if (c == '$' && pattern.substr(i + 1, 3) == "uri") {
      append_uri_safe(out, uri);
      i += 3;
    } else if (c == '$' && pattern.substr(i + 1, 11) == "request_uri") {
      append_uri_safe(out, request_uri);
      i += 11;
    } else if (c == '$' && pattern.substr(i + 1, 4) == "host") {
      for (char h : host) out += (h >= 'A' && h <= 'Z') ? static_cast<char>(h + 32) : h;
      i += 4;
    } else {
      out += c;
    }
  }
  return out;
}

void ReturnHandler::handle(const Request& request, Response& response) {
  response.set_status(options_.status);
  if (!options_.location.empty()) {
    if (location_has_variables_) {
      Regex::Captures captures;
      if (regex_) regex_->match(request.path, &captures);
      // The path and query as sent (not an absolute-form target's scheme and authority).
      std::string request_uri(request.raw_path);
      if (!request.query.empty() || request.target.find('?') != std::string_view::npos) {
        request_uri += '?';
        request_uri += request.query;
      }
      response.add_header("Location", expand(options_.location, captures, request.path, request_uri,
                                             http::host_without_port(request.host)));
    } else {
      response.add_header("Location", options_.location);
    }
  }
  if (!content_type_line_.empty()) response.set_prebuilt_headers(content_type_line_);
  response.append_borrowed_body(options_.body);
}

}  // namespace peregrine::return_route
