#include "config/upstream_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>

#include "config/address.h"
#include "config/listen_address.h"

namespace peregrine::config {

bool parse_upstream_address(std::string_view text, UpstreamServer* out, std::string* error,
                            std::string* hint) {
  SocketAddress parsed;
  if (!parse_socket_address(text, AddressRole::kUpstream, &parsed, error, hint)) return false;
  out->addr = parsed.addr;
  out->addr_len = parsed.len;
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
      "\"https://127.0.0.1:8443\", \"http://unix:/run/app.sock:\", optionally followed by a "
      "path such as \"/v1/\"";
  out->tls = text.starts_with("https://");
  if (!out->tls && !text.starts_with("http://")) {
    *error = "proxy target '" + std::string(text) + "' is not an http:// or https:// URL";
    *hint = text.find("://") == std::string_view::npos && !text.empty()
                ? "write \"http://" + std::string(text) + "\""
                : std::string(kExamples);
    return false;
  }
  if (has_space_or_control(text)) {
    *error = "proxy URL '" + std::string(text) + "' contains spaces or control characters";
    return false;
  }
  std::string_view rest = text.substr(out->tls ? 8 : 7);
  const char* default_port = out->tls ? ":443" : ":80";
  if (out->tls && rest.starts_with("unix:")) {
    *error = "proxy URL '" + std::string(text) + "' asks for TLS over a unix socket";
    *hint =
        "a unix socket is local: write \"http://unix:...\"; https:// is for back ends reached "
        "over TCP";
    return false;
  }
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
      out->address =
          std::string(authority) + default_port;  // brackets are never part of a group name
    } else {
      out->name = std::string(authority);
      in_addr ip4{};
      if (out->name == "localhost" || inet_pton(AF_INET, out->name.c_str(), &ip4) == 1) {
        out->default_port_address = out->name + default_port;
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

namespace {
bool same_tls(const UpstreamTls& a, const UpstreamTls& b) {
  return a.verify == b.verify && a.ca_file == b.ca_file && a.server_name == b.server_name &&
         a.certificate == b.certificate && a.key == b.key;
}
}  // namespace

std::string add_implicit_group(Config* config, const UpstreamServer& server, const SourcePos& pos,
                               const UpstreamTls* tls, bool* tls_conflict) {
  const bool secure = tls != nullptr && tls->enabled;
  std::string name = (secure ? "https://" : "") + canonical_upstream_address(server);
  for (const UpstreamGroup& group : config->upstreams) {
    if (group.name != name) continue;
    if (secure && tls_conflict != nullptr && !same_tls(group.tls, *tls)) *tls_conflict = true;
    return name;
  }
  UpstreamGroup group;
  group.name = name;
  if (secure) group.tls = *tls;
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
