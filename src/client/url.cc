#include "client/url.h"

#include <charconv>

#include "core/strings.h"

namespace peregrine::client {
namespace {

// What may appear raw in a request-target: visible ASCII but for what RFC 3986 never allows
// unencoded (space, '"', '<', '>', '\\', '^', '`', '{', '|', '}'), so that a URL cannot inject a
// second line or confuse the back end's parser.
bool target_char_ok(char ch) {
  auto c = static_cast<unsigned char>(ch);
  if (c <= 0x20 || c >= 0x7f) return false;
  return std::string_view("\"<>\\^`{|}").find(ch) == std::string_view::npos;
}

bool host_char_ok(char ch) {
  auto c = static_cast<unsigned char>(ch);
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || ch == '-' ||
         ch == '.' || ch == '_';
}

}  // namespace

std::string Url::address() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  out += ':';
  out += std::to_string(port);
  return out;
}

std::optional<Url> parse_url(std::string_view text, std::string* error) {
  Url url;
  size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) {
    *error = "not an absolute URL (http://host/... or https://host/...)";
    return std::nullopt;
  }
  std::string_view scheme = text.substr(0, scheme_end);
  if (ascii_iequals(scheme, "https")) {
    url.tls = true;
  } else if (!ascii_iequals(scheme, "http")) {
    *error = "unsupported scheme \"" + std::string(scheme) + "\" (http or https)";
    return std::nullopt;
  }
  text.remove_prefix(scheme_end + 3);
  size_t fragment = text.find('#');
  if (fragment != std::string_view::npos) text = text.substr(0, fragment);
  size_t authority_end = text.find_first_of("/?");
  std::string_view authority = text.substr(0, authority_end);
  std::string_view rest =
      authority_end == std::string_view::npos ? std::string_view() : text.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) {
    *error = "credentials in the URL are not supported (send an Authorization header)";
    return std::nullopt;
  }

  std::string_view host = authority;
  std::string_view port;
  bool port_written = false;  // a ':' after the host: the port must follow
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      *error = "unterminated IPv6 address";
      return std::nullopt;
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        *error = "unexpected characters after the IPv6 address";
        return std::nullopt;
      }
      port = after.substr(1);
      port_written = true;
    }
    for (char ch : host)
      if (!(ch == ':' || ch == '.' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
            (ch >= 'A' && ch <= 'F'))) {
        *error = "invalid IPv6 address";
        return std::nullopt;
      }
  } else {
    size_t colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      port_written = true;
    }
    for (char ch : host)
      if (!host_char_ok(ch)) {
        *error = "invalid character in the host";
        return std::nullopt;
      }
  }
  if (host.empty()) {
    *error = "missing host";
    return std::nullopt;
  }
  url.host = std::string(host);
  url.port = url.tls ? 443 : 80;
  if (port_written) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      *error = "invalid port \"" + std::string(port) + "\"";
      return std::nullopt;
    }
    url.port = static_cast<uint16_t>(value);
  }
  url.authority = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  if (url.port != (url.tls ? 443 : 80)) url.authority += ":" + std::to_string(url.port);

  for (char ch : rest)
    if (!target_char_ok(ch)) {
      *error = "invalid character in the path or query (percent-encode it)";
      return std::nullopt;
    }
  size_t q = rest.find('?');
  std::string_view path = rest.substr(0, q);
  url.path = path.empty() ? "/" : std::string(path);
  if (q != std::string_view::npos) url.query = std::string(rest.substr(q + 1));
  return url;
}

}  // namespace peregrine::client
