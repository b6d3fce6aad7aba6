#include "config/upstream_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>

#include "config/listen_address.h"

namespace peregrine::config {

namespace {

constexpr std::string_view kForms =
    "valid forms: \"127.0.0.1:9000\", \"[::1]:9000\", \"localhost:9000\", "
    "\"unix:/run/php/php-fpm.sock\"";

bool parse_port(std::string_view text, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value == 0 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool has_bad_chars(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return true;
  }
  return false;
}

bool parse_unix(std::string_view text, UpstreamServer* out, std::string* error, std::string* hint) {
  std::string_view path = text.substr(5);
  if (path.empty() || path.front() != '/') {
    *error = "unix socket path in '" + std::string(text) + "' is not absolute";
    *hint = "write unix: followed by an absolute path, e.g. \"unix:/run/php/php8.2-fpm.sock\"";
    return false;
  }
  if (path.find('\0') != std::string_view::npos || has_bad_chars(path)) {
    *error =
        "unix socket path in '" + std::string(text) + "' contains spaces or control characters";
    return false;
  }
  sockaddr_un un{};
  if (path.size() >= sizeof(un.sun_path)) {
    *error = "unix socket path in '" + std::string(text) + "' is too long (" +
             std::to_string(path.size()) + " bytes)";
    *hint = "the kernel limit is " + std::to_string(sizeof(un.sun_path) - 1) +
            " bytes; use a shorter path or a symbolic link to the directory";
    return false;
  }
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, path.data(), path.size());
  out->addr = sockaddr_storage{};
  std::memcpy(&out->addr, &un, sizeof un);
  out->addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  out->address = std::string(text);
  return true;
}

}  // namespace

bool parse_upstream_address(std::string_view text, UpstreamServer* out, std::string* error,
                            std::string* hint) {
  error->clear();
  hint->clear();
  if (text.empty()) {
    *error = "empty upstream address";
    *hint = std::string(kForms);
    return false;
  }
  if (text.starts_with("unix:")) return parse_unix(text, out, error, hint);
  if (text.find("://") != std::string_view::npos) {
    *error = "upstream address '" + std::string(text) + "' is a URL";
    *hint = "write the address alone, without a scheme: " + std::string(kForms);
    return false;
  }
  if (has_bad_chars(text)) {
    *error = "upstream address '" + std::string(text) + "' contains spaces or control characters";
    return false;
  }
  auto bad_port = [&](std::string_view port_text) {
    *error = "invalid port '" + std::string(port_text) + "' in upstream address '" +
             std::string(text) + "'";
    *hint = "a port is an integer 1..65535";
    return false;
  };
  uint16_t port = 0;

  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      *error = "upstream address '" + std::string(text) + "' has '[' without ']'";
      *hint = "write IPv6 addresses in brackets: \"[::1]:8080\"";
      return false;
    }
    std::string host(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':' || rest.size() == 1) {
      *error = "upstream address '" + std::string(text) + "' has no port";
      *hint = "write IPv6 addresses in brackets followed by the port: \"[::1]:8080\"";
      return false;
    }
    if (!parse_port(rest.substr(1), &port)) return bad_port(rest.substr(1));
    in6_addr ip{};
    if (host.find('%') != std::string::npos || inet_pton(AF_INET6, host.c_str(), &ip) != 1) {
      *error =
          "invalid IPv6 address '" + host + "' in upstream address '" + std::string(text) + "'";
      *hint = "for example \"[::1]:8080\"";
      return false;
    }
    if (IN6_IS_ADDR_UNSPECIFIED(&ip)) {
      *error = "upstream address '" + std::string(text) + "' is the unspecified address";
      *hint = "name the back end's own address, e.g. \"[::1]:8080\"";
      return false;
    }
    out->addr = sockaddr_storage{};
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out->addr);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    sin6->sin6_addr = ip;
    out->addr_len = sizeof(sockaddr_in6);
    out->address = std::string(text);
    return true;
  }

  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    *error = "upstream address '" + std::string(text) + "' has no port";
    *hint = std::string(kForms);
    return false;
  }
  if (text.find(':') != colon) {
    *error =
        "upstream address '" + std::string(text) + "' looks like an IPv6 address without brackets";
    *hint = "write IPv6 addresses in brackets: \"[::1]:8080\"";
    return false;
  }
  std::string host(text.substr(0, colon));
  std::string_view port_text = text.substr(colon + 1);
  if (port_text.empty()) {
    *error = "upstream address '" + std::string(text) + "' has no port";
    *hint = std::string(kForms);
    return false;
  }
  if (!parse_port(port_text, &port)) return bad_port(port_text);
  in_addr ip{};
  if (host == "localhost") {
    ip.s_addr = htonl(INADDR_LOOPBACK);
  } else if (host.empty() || host == "*" || inet_pton(AF_INET, host.c_str(), &ip) != 1) {
    bool numeric = !host.empty() && host.find_first_not_of("0123456789.") == std::string::npos;
    if (host.empty() || host == "*") {
      *error = "upstream address '" + std::string(text) + "' has no host";
      *hint = "name the back end, e.g. \"127.0.0.1:" + std::string(port_text) + "\"";
    } else if (numeric) {
      *error =
          "invalid IPv4 address '" + host + "' in upstream address '" + std::string(text) + "'";
      *hint = "an IPv4 address is four numbers 0..255, e.g. \"192.168.1.10:8080\"";
    } else {
      *error = "upstream address '" + std::string(text) +
               "' names a host; only IP addresses and 'localhost' are accepted";
      *hint =
          "host names are not resolved (starting must not depend on DNS); write the back "
          "end's IP address";
    }
    return false;
  }
  if (ip.s_addr == htonl(INADDR_ANY)) {
    *error = "upstream address '" + std::string(text) + "' is the unspecified address 0.0.0.0";
    *hint = "name the back end's own address, e.g. \"127.0.0.1:" + std::string(port_text) + "\"";
    return false;
  }
  out->addr = sockaddr_storage{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&out->addr);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  sin->sin_addr = ip;
  out->addr_len = sizeof(sockaddr_in);
  out->address = std::string(text);
  return true;
}

std::string canonical_upstream_address(const UpstreamServer& server) {
  if (server.addr.ss_family == AF_UNIX) {
    const auto& un = reinterpret_cast<const sockaddr_un&>(server.addr);
    return "unix:" + std::string(un.sun_path);
  }
  std::string text = format_endpoint(server.addr);
  return text.empty() ? server.address : text;
}

bool is_group_name(std::string_view text) {
  if (text.empty() || text.size() > 128) return false;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool parse_proxy_url(std::string_view text, ProxyUrl* out, std::string* error, std::string* hint) {
  *out = ProxyUrl{};
  error->clear();
  hint->clear();
  constexpr std::string_view kExamples =
      "e.g. \"http://app\" (an [[upstream]] group), \"http://127.0.0.1:8080\", "
      "\"http://unix:/run/app.sock:\", optionally followed by a path such as \"/v1/\"";
  if (text.starts_with("https://")) {
    *error = "proxying to https:// back ends is not supported ('" + std::string(text) + "')";
    *hint =
        "TLS to upstreams is not supported yet; reach the back end over http:// on a "
        "trusted network or a unix socket";
    return false;
  }
  if (!text.starts_with("http://")) {
    *error = "proxy target '" + std::string(text) + "' is not an http:// URL";
    *hint = text.find("://") == std::string_view::npos && !text.empty()
                ? "write \"http://" + std::string(text) + "\""
                : std::string(kExamples);
    return false;
  }
  if (has_bad_chars(text)) {
    *error = "proxy URL '" + std::string(text) + "' contains spaces or control characters";
    return false;
  }
  std::string_view rest = text.substr(7);
  std::string_view authority;
  if (rest.starts_with("unix:")) {
    // nginx's form: the socket path ends at the next ':', the URI path follows it.
    size_t end = rest.find(':', 5);
    if (end == std::string_view::npos) {
      *error = "unix socket in proxy URL '" + std::string(text) + "' is not followed by ':'";
      *hint =
          "end the socket path with ':', e.g. \"http://unix:/run/app.sock:\" or "
          "\"http://unix:/run/app.sock:/v1/\"";
      return false;
    }
    authority = rest.substr(0, end);
    rest = rest.substr(end + 1);
    out->address = std::string(authority);
  } else {
    size_t slash = rest.find_first_of("/?#");
    authority = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (authority.empty()) {
      *error = "proxy URL '" + std::string(text) + "' has no host";
      *hint = std::string(kExamples);
      return false;
    }
    if (authority.find('@') != std::string_view::npos) {
      *error = "proxy URL '" + std::string(text) + "' contains user information";
      *hint =
          "credentials for the back end go in a request header, e.g. request_headers = "
          "{ set = { Authorization = \"...\" } }";
      return false;
    }
    bool has_port = authority.front() == '[' ? authority.find("]:") != std::string_view::npos
                                             : authority.find(':') != std::string_view::npos;
    if (has_port) {
      out->address = std::string(authority);
    } else if (authority.front() == '[') {
      out->address = std::string(authority) + ":80";  // brackets are never part of a group name
    } else {
      out->name = std::string(authority);
      in_addr ip4{};
      if (out->name == "localhost" || inet_pton(AF_INET, out->name.c_str(), &ip4) == 1) {
        out->default_port_address = out->name + ":80";
      }
    }
  }
  if (!rest.empty()) {
    if (rest.front() != '/') {
      *error = "the path in proxy URL '" + std::string(text) + "' must start with '/'";
      *hint = std::string(kExamples);
      return false;
    }
    if (rest.find_first_of("?#") != std::string_view::npos) {
      *error = "proxy URL '" + std::string(text) + "' has a query or fragment";
      *hint = "the request's own query string is passed on; a proxy URL has at most a path";
      return false;
    }
    out->path = std::string(rest);
  }
  return true;
}

std::string add_implicit_group(Config* config, const UpstreamServer& server, const SourcePos& pos) {
  std::string name = canonical_upstream_address(server);
  for (const UpstreamGroup& group : config->upstreams) {
    if (group.name == name) return name;
  }
  UpstreamGroup group;
  group.name = name;
  group.servers.push_back(server);
  group.servers.back().pos = pos;
  group.pos = pos;
  config->upstreams.push_back(std::move(group));
  return name;
}

std::string declared_group_names(const Config& config) {
  std::string out;
  for (const UpstreamGroup& group : config.upstreams) {
    if (group.name.find(':') != std::string::npos) continue;  // implicit
    if (!out.empty()) out += ", ";
    out += group.name;
  }
  return out;
}

std::shared_ptr<const Regex> default_split_path() {
  static const std::shared_ptr<const Regex> compiled = [] {
    std::string message;
    size_t offset = 0;
    return Regex::compile(kDefaultSplitPath, &message, &offset);
  }();
  return compiled;
}

}  // namespace peregrine::config
