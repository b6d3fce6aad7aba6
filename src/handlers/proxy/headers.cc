#include "handlers/proxy/headers.h"

#include <algorithm>

#include "core/strings.h"
#include "http/header_names.h"

namespace peregrine::proxy {

using http::is_hop_by_hop;

namespace {

// The names listed by every Connection header (comma-separated tokens, OWS around them).
std::vector<std::string_view> connection_tokens(std::span<const HeaderView> in) {
  std::vector<std::string_view> tokens;
  for (const HeaderView& h : in) {
    if (!ascii_iequals(h.name, "Connection")) continue;
    std::string_view rest = h.value;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view token = trim_ows(rest.substr(0, comma));
      if (!token.empty()) tokens.push_back(token);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return tokens;
}

bool listed(const std::vector<std::string_view>& names, std::string_view name) {
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view n) { return ascii_iequals(n, name); });
}

// An Upgrade value without h2c: a back end is never offered the cleartext HTTP/2 upgrade, the
// way around a proxy's rules ("h2c smuggling"). Empty when nothing else was offered.
std::string upgrade_without_h2c(std::string_view value) {
  std::string out;
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view protocol = trim_ows(value.substr(0, comma));
    if (!protocol.empty() && !ascii_iequals(protocol, "h2c")) {
      if (!out.empty()) out += ", ";
      out += protocol;
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return out;
}

// Copies `in` without hop-by-hop headers. When tunnelling, Upgrade survives (less h2c) and
// "Connection: upgrade" is added if an Upgrade header was present.
HeaderList end_to_end(std::span<const HeaderView> in, bool tunnel) {
  std::vector<std::string_view> named = connection_tokens(in);
  HeaderList out;
  out.reserve(in.size() + 6);
  bool upgrade = false;
  for (const HeaderView& h : in) {
    bool is_upgrade = ascii_iequals(h.name, "Upgrade");
    if (tunnel && is_upgrade) {
      std::string offered = upgrade_without_h2c(h.value);
      if (offered.empty()) continue;
      upgrade = true;
      out.push_back({std::string(h.name), std::move(offered)});
      continue;
    }
    // Host is what the request was routed by: a client's "Connection: host" does not get to
    // hand the back end another name (the upstream's) in its place.
    if (is_hop_by_hop(h.name) || (listed(named, h.name) && !ascii_iequals(h.name, "Host")))
      continue;
    out.push_back({std::string(h.name), std::string(h.value)});
  }
  if (upgrade) out.push_back({"Connection", "upgrade"});
  return out;
}

void remove_all(HeaderList& headers, std::string_view name) {
  std::erase_if(headers, [&](const Header& h) { return ascii_iequals(h.name, name); });
}

// Replaces the first header called `name` in place and drops the others; appends when absent.
// An empty value removes them all.
void set_header(HeaderList& headers, std::string_view name, std::string_view value) {
  if (value.empty()) {
    remove_all(headers, name);
    return;
  }
  bool done = false;
  std::erase_if(headers, [&](Header& h) {
    if (!ascii_iequals(h.name, name)) return false;
    if (done) return true;
    h.value.assign(value);
    done = true;
    return false;
  });
  if (!done) headers.push_back({std::string(name), std::string(value)});
}

// All values of `name` joined with ", " (the list form of repeated headers); nullopt if none.
std::optional<std::string> joined(const HeaderList& headers, std::string_view name) {
  std::optional<std::string> out;
  for (const Header& h : headers) {
    if (!ascii_iequals(h.name, name)) continue;
    std::string_view v = trim_ows(h.value);
    if (v.empty()) continue;
    if (!out) {
      out.emplace(v);
    } else {
      *out += ", ";
      *out += v;
    }
  }
  return out;
}

const Header* find(const HeaderList& headers, std::string_view name) {
  for (const Header& h : headers)
    if (ascii_iequals(h.name, name)) return &h;
  return nullptr;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

void append_forwarded_value(std::string& out, std::string_view value) {
  if (is_token(value)) {
    out += value;
    return;
  }
  out += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

struct Origin {
  std::string_view scheme;
  std::string_view host;  // brackets kept for IPv6
  unsigned port = 0;
};

unsigned default_port(std::string_view scheme) {
  if (ascii_iequals(scheme, "http") || ascii_iequals(scheme, "ws")) return 80;
  if (ascii_iequals(scheme, "https") || ascii_iequals(scheme, "wss")) return 443;
  return 0;
}

// Parses "scheme://authority" at the start of `url`; `rest` gets what follows the authority.
std::optional<Origin> parse_origin(std::string_view url, std::string_view* rest) {
  size_t sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  Origin o;
  o.scheme = url.substr(0, sep);
  std::string_view after = url.substr(sep + 3);
  size_t end = after.find_first_of("/?#");
  std::string_view authority = after.substr(0, end);
  if (rest) *rest = end == std::string_view::npos ? std::string_view() : after.substr(end);
  if (authority.empty() || authority.find('@') != std::string_view::npos) return std::nullopt;
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  std::string_view port_text;
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    o.host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  } else {
    o.host = authority;
  }
  if (o.host.empty()) return std::nullopt;
  if (port_text.empty()) {
    o.port = default_port(o.scheme);
  } else {
    if (port_text.size() > 5) return std::nullopt;
    for (char c : port_text) {
      if (c < '0' || c > '9') return std::nullopt;
      o.port = o.port * 10 + static_cast<unsigned>(c - '0');
    }
  }
  return o;
}

void rewrite_header(HeaderList& headers, std::string_view name, const ResponseOptions& options,
                    std::optional<std::string> (*rewrite)(std::string_view, std::string_view,
                                                          std::string_view)) {
  for (Header& h : headers) {
    if (!ascii_iequals(h.name, name)) continue;
    if (std::optional<std::string> v =
            rewrite(h.value, options.upstream_origin, options.client_origin))
      h.value = std::move(*v);
  }
}

}  // namespace

void apply_rules(HeaderList& headers, const HeaderRules& rules) {
  for (const std::string& name : rules.remove) remove_all(headers, name);
  for (const Header& h : rules.set) set_header(headers, h.name, h.value);
  for (const Header& h : rules.add) headers.push_back(h);
}

std::string forwarded_element(std::string_view client_ip, std::string_view scheme,
                              std::string_view host) {
  std::string out;
  auto part = [&](std::string_view key, std::string_view value) {
    if (value.empty()) return;
    if (!out.empty()) out += ';';
    out += key;
    out += '=';
    append_forwarded_value(out, value);
  };
  if (client_ip.find(':') != std::string_view::npos && client_ip.front() != '[') {
    part("for", "[" + std::string(client_ip) + "]");
  } else {
    part("for", client_ip);
  }
  part("proto", scheme);
  part("host", host);
  return out;
}

HeaderList rewrite_request_headers(std::span<const HeaderView> in, const RequestContext& context,
                                   const RequestOptions& options) {
  HeaderList out = end_to_end(in, context.tunnel);

  const Header* client_host_header = find(out, "Host");
  std::string client_host = client_host_header ? client_host_header->value : std::string();
  switch (options.host_mode) {
    case HostMode::kPass:
      if (client_host.empty()) set_header(out, "Host", context.upstream_host);
      break;
    case HostMode::kUpstream:
      set_header(out, "Host", context.upstream_host);
      break;
    case HostMode::kFixed:
      set_header(out, "Host", options.fixed_host);
      break;
  }

  const ForwardingOptions& fwd = options.forwarding;
  if (fwd.x_forwarded_for && !context.client_ip.empty()) {
    std::optional<std::string> chain = joined(out, "X-Forwarded-For");
    std::string value = chain ? *chain + ", " : std::string();
    value += context.client_ip;
    remove_all(out, "X-Forwarded-For");
    out.push_back({"X-Forwarded-For", std::move(value)});
  }
  if (fwd.x_forwarded_proto) {
    remove_all(out, "X-Forwarded-Proto");
    if (!context.scheme.empty()) out.push_back({"X-Forwarded-Proto", std::string(context.scheme)});
  }
  if (fwd.x_forwarded_host) {
    remove_all(out, "X-Forwarded-Host");
    if (!client_host.empty()) out.push_back({"X-Forwarded-Host", client_host});
  }
  if (fwd.x_real_ip) {
    remove_all(out, "X-Real-IP");
    if (!context.client_ip.empty()) out.push_back({"X-Real-IP", std::string(context.client_ip)});
  }
  if (fwd.forwarded) {
    std::optional<std::string> chain = joined(out, "Forwarded");
    std::string value = chain ? *chain + ", " : std::string();
    value += forwarded_element(context.client_ip, context.scheme, client_host);
    remove_all(out, "Forwarded");
    out.push_back({"Forwarded", std::move(value)});
  }

  apply_rules(out, options.rules);
  return out;
}

HeaderList rewrite_response_headers(std::span<const HeaderView> in, const ResponseOptions& options,
                                    bool tunnel) {
  HeaderList out = end_to_end(in, tunnel);
  if (!options.upstream_origin.empty() && !options.client_origin.empty()) {
    if (options.rewrite_location) rewrite_header(out, "Location", options, rewrite_url);
    if (options.rewrite_refresh) rewrite_header(out, "Refresh", options, rewrite_refresh);
  }
  apply_rules(out, options.rules);
  return out;
}

std::optional<std::string> map_path(std::string_view path, std::string_view prefix,
                                    std::string_view replacement) {
  if (!path.starts_with(prefix)) return std::nullopt;
  std::string_view rest = path.substr(prefix.size());
  if (!prefix.empty() && prefix.back() != '/' && !rest.empty() && rest.front() != '/' &&
      rest.front() != '?')
    return std::nullopt;
  std::string out(replacement);
  if (!out.empty() && out.back() == '/' && !rest.empty() && rest.front() == '/')
    rest.remove_prefix(1);
  if (!out.empty() && out.back() != '/' && !rest.empty() && rest.front() != '/' &&
      rest.front() != '?')
    out += '/';
  out += rest;
  if (out.empty() || out.front() != '/') out.insert(out.begin(), '/');
  return out;
}

std::optional<std::string> rewrite_url(std::string_view url, std::string_view upstream_origin,
                                       std::string_view client_origin) {
  std::string_view url_rest;
  std::string_view origin_rest;
  std::optional<Origin> u = parse_origin(trim_ows(url), &url_rest);
  std::optional<Origin> up = parse_origin(upstream_origin, &origin_rest);
  if (!u || !up || u->port == 0) return std::nullopt;
  if (!ascii_iequals(u->scheme, up->scheme) || !ascii_iequals(u->host, up->host) ||
      u->port != up->port)
    return std::nullopt;
  while (!client_origin.empty() && client_origin.back() == '/') client_origin.remove_suffix(1);
  std::string out(client_origin);
  if (url_rest.empty() || url_rest.front() != '/') out += '/';
  if (!url_rest.empty()) out += url_rest;
  // A bare origin ("http://up:8080") becomes the client origin with "/" to stay a valid URL.
  return out;
}

std::optional<std::string> rewrite_refresh(std::string_view value, std::string_view upstream_origin,
                                           std::string_view client_origin) {
  size_t semi = value.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  size_t i = semi + 1;
  while (i < value.size() && is_ows(value[i])) ++i;
  if (value.size() - i < 3 || !ascii_iequals(value.substr(i, 3), "url")) return std::nullopt;
  i += 3;
  while (i < value.size() && is_ows(value[i])) ++i;
  if (i >= value.size() || value[i] != '=') return std::nullopt;
  ++i;
  while (i < value.size() && is_ows(value[i])) ++i;
  size_t start = i;
  size_t end = value.size();
  if (i < value.size() && (value[i] == '\'' || value[i] == '"')) {
    start = i + 1;
    size_t close = value.find(value[i], start);
    end = close == std::string_view::npos ? value.size() : close;
  }
  std::optional<std::string> url =
      rewrite_url(value.substr(start, end - start), upstream_origin, client_origin);
  if (!url) return std::nullopt;
  std::string out(value.substr(0, start));
  out += *url;
  out += value.substr(end);
  return out;
}

void append_header_block(std::string& out, const HeaderList& headers) {
  for (const Header& h : headers) {
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
}

namespace {

// Connection headers that only say close / keep-alive name no field the fast paths would keep
// (Keep-Alive is hop-by-hop anyway; a field called "close" sends us to the general path).
// Whether the Connection header `value` names nothing but close and keep-alive.
bool connection_tokens_plain(std::string_view value) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view token = trim_ows(value.substr(0, comma));
    if (!token.empty() && !ascii_iequals(token, "close") && !ascii_iequals(token, "keep-alive"))
      return false;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return true;
}

void append_line(std::string& out, std::string_view name, std::string_view value) {
  // One size change and plain copies: this runs for every header of every proxied message.
  const size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  std::char_traits<char>::copy(p, name.data(), name.size());  // copes with an empty view
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::char_traits<char>::copy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

bool connection_names_only_itself(std::span<const HeaderView> in) {
  for (const HeaderView& h : in) {
    if (ascii_iequals(h.name, "close")) return false;  // a field it may name: general path
    if (ascii_iequals(h.name, "Connection") && !connection_tokens_plain(h.value)) return false;
  }
  return true;
}

}  // namespace

bool append_request_headers_fast(std::string& out, std::span<const HeaderView> in,
                                 const RequestContext& context, const RequestOptions& options) {
  const ForwardingOptions& fwd = options.forwarding;
  if (context.tunnel || fwd.forwarded || !options.rules.remove.empty() ||
      !options.rules.set.empty() || !options.rules.add.empty() || !connection_names_only_itself(in))
    return false;
  std::string_view forced_host;  // kUpstream / kFixed: replaces the client's
  if (options.host_mode == HostMode::kUpstream) forced_host = context.upstream_host;
  if (options.host_mode == HostMode::kFixed) forced_host = options.fixed_host;
  if (options.host_mode != HostMode::kPass && forced_host.empty()) return false;
  // Host: the general path keeps the first and (when replacing) drops the others; a present but
  // empty one is replaced in place. Leave those shapes to it.
  const HeaderView* host = nullptr;
  for (const HeaderView& h : in) {
    if (!ascii_iequals(h.name, "Host")) continue;
    if (host || h.value.empty()) return false;
    host = &h;
  }
  const bool add_xff = fwd.x_forwarded_for && !context.client_ip.empty();
  const size_t start = out.size();
  std::string_view xff_chain[8];
  size_t xff_count = 0;
  for (const HeaderView& h : in) {
    if (is_hop_by_hop(h.name)) continue;
    if (add_xff && ascii_iequals(h.name, "X-Forwarded-For")) {
      std::string_view v = trim_ows(h.value);
      if (v.empty()) continue;
      if (xff_count == std::size(xff_chain)) {
        out.resize(start);
        return false;
      }
      xff_chain[xff_count++] = v;
      continue;
    }
    if ((fwd.x_forwarded_proto && ascii_iequals(h.name, "X-Forwarded-Proto")) ||
        (fwd.x_forwarded_host && ascii_iequals(h.name, "X-Forwarded-Host")) ||
        (fwd.x_real_ip && ascii_iequals(h.name, "X-Real-IP")))
      continue;
    if (&h == host && !forced_host.empty()) {
      append_line(out, h.name, forced_host);
      continue;
    }
    append_line(out, h.name, h.value);
  }
  if (!host) {
    std::string_view value = forced_host.empty() ? context.upstream_host : forced_host;
    if (value.empty()) {
      out.resize(start);
      return false;
    }
    append_line(out, "Host", value);
  }
  const std::string_view client_host = host ? host->value : std::string_view();
  if (add_xff) {
    out.append("X-Forwarded-For: ");
    for (size_t i = 0; i < xff_count; ++i) out.append(xff_chain[i]).append(", ");
    out.append(context.client_ip).append("\r\n");
  }
  if (fwd.x_forwarded_proto && !context.scheme.empty())
    append_line(out, "X-Forwarded-Proto", context.scheme);
  if (fwd.x_forwarded_host && !client_host.empty())
    append_line(out, "X-Forwarded-Host", client_host);
  if (fwd.x_real_ip && !context.client_ip.empty()) append_line(out, "X-Real-IP", context.client_ip);
  return true;
}

bool append_response_headers_fast(std::string& out, std::span<const HeaderView> in,
                                  const ResponseOptions& options, bool tunnel) {
  if (tunnel || !options.rules.remove.empty() || !options.rules.set.empty() ||
      !options.rules.add.empty())
    return false;
  const bool rewrites = !options.upstream_origin.empty() && !options.client_origin.empty();
  const bool location = rewrites && options.rewrite_location;
  const bool refresh = rewrites && options.rewrite_refresh;
  // One pass: most names match none of the special ones by length alone. Anything the general
  // path would treat differently undoes what was written and hands over.
  const size_t start = out.size();
  for (const HeaderView& h : in) {
    bool general = false;
    switch (h.name.size()) {
      case 5:
        general = ascii_iequals(h.name, "close");  // a field Connection may name
        break;
      case 7:
        general = refresh && ascii_iequals(h.name, "Refresh");
        break;
      case 8:
        general = location && ascii_iequals(h.name, "Location");
        break;
      case 10:
        general = ascii_iequals(h.name, "Connection") && !connection_tokens_plain(h.value);
        break;
      default:
        break;
    }
    if (general) {
      out.resize(start);
      return false;
    }
    if (!is_hop_by_hop(h.name)) append_line(out, h.name, h.value);
  }
  return true;
}

}  // namespace peregrine::proxy
