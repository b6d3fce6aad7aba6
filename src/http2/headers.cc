#include "http2/headers.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "core/strings.h"

namespace peregrine::http2 {

Method method_from_text(std::string_view text) {
  switch (text.size()) {
    case 3:
      if (text == "GET") return Method::kGet;
      if (text == "PUT") return Method::kPut;
      break;
    case 4:
      if (text == "HEAD") return Method::kHead;
      if (text == "POST") return Method::kPost;
      break;
    case 5:
      if (text == "PATCH") return Method::kPatch;
      if (text == "TRACE") return Method::kTrace;
      break;
    case 6:
      if (text == "DELETE") return Method::kDelete;
      break;
    case 7:
      if (text == "OPTIONS") return Method::kOptions;
      if (text == "CONNECT") return Method::kConnect;
      break;
  }
  return Method::kUnknown;
}

bool is_connection_specific(std::string_view name) {
  switch (name.size()) {
    case 2:
      return ascii_iequals(name, "te");
    case 7:
      return ascii_iequals(name, "upgrade");
    case 10:
      return ascii_iequals(name, "connection") || ascii_iequals(name, "keep-alive");
    case 14:
      return ascii_iequals(name, "http2-settings");
    case 16:
      return ascii_iequals(name, "proxy-connection");
    case 17:
      return ascii_iequals(name, "transfer-encoding");
  }
  return false;
}

namespace {

constexpr bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

constexpr bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// RFC 3986 reg-name: unreserved and sub-delims ('%' escapes are handled apart). A table: every
// request's :authority is checked with it.
constexpr auto kHostChars = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 256; ++c)
    table[c] = is_alpha(static_cast<char>(c)) || is_digit(static_cast<char>(c));
  for (char c : std::string_view("-._~!$&'()*+,;=")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

constexpr bool is_host_char(char c) {
  return kHostChars[static_cast<unsigned char>(c)];
}

}  // namespace

bool valid_method(std::string_view method) {
  if (method.empty()) return false;
  for (char c : method)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  return true;
}

bool valid_origin_path(std::string_view path) {
  if (path.empty() || path[0] != '/') return false;
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e || u == '#') return false;
  }
  return true;
}

bool valid_scheme(std::string_view scheme) {
  if (scheme.empty() || !is_alpha(scheme[0])) return false;
  for (char c : scheme)
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return false;
  return true;
}

bool valid_authority(std::string_view authority, bool require_port) {
  const char* p = authority.data();
  const char* e = p + authority.size();
  if (p == e) return false;
  if (*p == '[') {
    const char* s = ++p;
    while (p < e && (is_hex(*p) || *p == ':' || *p == '.')) ++p;
    if (p == s || p == e || *p != ']') return false;
    ++p;
  } else {
    const char* s = p;
    while (p < e) {
      if (is_host_char(*p)) {
        ++p;
      } else if (*p == '%') {
        if (e - p < 3 || !is_hex(p[1]) || !is_hex(p[2])) return false;
        p += 3;
      } else {
        break;
      }
    }
    if (p == s) return false;
  }
  if (p == e) return !require_port;
  if (*p != ':') return false;
  ++p;
  if (e - p > 5) return false;
  if (p == e) return !require_port;
  uint32_t port = 0;
  for (; p < e; ++p) {
    if (!is_digit(*p)) return false;
    port = port * 10 + static_cast<uint32_t>(*p - '0');
  }
  return port <= 65535;
}

void RequestHeadBuilder::reset() {
  storage_.clear();
  fields_.clear();
  cookies_.clear();
  has_method_ = has_scheme_ = has_path_ = has_authority_ = false;
  regular_seen_ = false;
  too_large_ = false;
  list_bytes_ = 0;
}

RequestHeadBuilder::Span RequestHeadBuilder::keep(std::string_view bytes) {
  Span s{static_cast<uint32_t>(storage_.size()), static_cast<uint32_t>(bytes.size())};
  storage_.append(bytes);
  return s;
}

bool RequestHeadBuilder::add(std::string_view name, std::string_view value) {
  list_bytes_ += name.size() + value.size() + 32;
  if (list_bytes_ > max_list_bytes_) too_large_ = true;
  if (!name.empty() && name[0] == ':') {
    if (regular_seen_) return false;  // RFC 9113 8.3: pseudo-headers come first
    Span* slot;
    bool* seen;
    if (name == ":method") {
      slot = &method_, seen = &has_method_;
    } else if (name == ":path") {
      slot = &path_, seen = &has_path_;
    } else if (name == ":scheme") {
      slot = &scheme_, seen = &has_scheme_;
    } else if (name == ":authority") {
      slot = &authority_, seen = &has_authority_;
    } else {
      return false;  // :status or an unknown pseudo-header in a request
    }
    if (*seen) return false;
    *seen = true;
    *slot = too_large_ ? Span{} : keep(value);
    return true;
  }
  regular_seen_ = true;
  if (too_large_) return true;
  if (name == "cookie") {
    cookies_.push_back(keep(value));
    return true;
  }
  if (fields_.size() >= kMaxHeaders) {
    too_large_ = true;
    return true;
  }
  Span n = keep(name);
  fields_.push_back({n, keep(value)});
  return true;
}

int RequestHeadBuilder::finish(Request& request, bool end_stream) {
  request.clear();
  if (too_large_) return 431;
  if (!has_method_) return 400;
  // Everything that is appended to the storage comes first: views are taken afterwards (an
  // append may move the storage).
  Span cookie{};
  if (!cookies_.empty()) {
    std::string joined;
    for (size_t i = 0; i < cookies_.size(); ++i) {
      if (i) joined.append("; ");
      joined.append(view(cookies_[i]));
    }
    cookie = keep(joined);
  }
  const std::string_view method = view(method_);
  const bool connect = method == "CONNECT";
  // RFC 9113 8.3.1: all three for a request, none but :authority for CONNECT.
  if (connect ? (has_path_ || has_scheme_ || !has_authority_)
              : (!has_path_ || !has_scheme_ || path_.length == 0))
    return 400;
  // The pseudo-headers become an HTTP/1.1 request line and Host when proxied: each is checked
  // against the grammar HTTP/1.1 would parse it with (headers.h).
  if (!valid_method(method)) return 400;
  if (has_scheme_ && !valid_scheme(view(scheme_))) return 400;
  const std::string_view authority = view(authority_);
  if (has_authority_ && !valid_authority(authority, /*require_port=*/connect)) return 400;
  const size_t extra = (cookies_.empty() ? 0 : 1) + (has_authority_ ? 1 : 0);
  if (fields_.size() + extra > kMaxHeaders) return 431;

  request.method_text = method;
  request.method = method_from_text(method);
  request.version_major = 2;
  request.version_minor = 1;  // HTTP/1.1 semantics wherever a handler asks (keep-alive, chunked)
  bool host_sent = false;
  for (const Field& f : fields_) {
    std::string_view name = view(f.name);
    std::string_view value = view(f.value);
    if (name == "content-length") {
      uint64_t length = 0;
      if (value.empty() || value.size() > 18) return 400;
      for (char c : value) {
        if (c < '0' || c > '9') return 400;
        length = length * 10 + static_cast<uint64_t>(c - '0');
      }
      if (request.content_length >= 0 && static_cast<uint64_t>(request.content_length) != length)
        return 400;
      request.content_length = static_cast<int64_t>(length);
    } else if (name == "host") {
      if (has_authority_) {
        // RFC 9113 8.3.1: :authority wins. A host naming another authority could be routed on
        // by one hop and acted on by the next, so it is refused (as nginx does); one naming the
        // same is dropped here, the single host field comes from :authority below.
        if (!ascii_iequals(value, authority)) return 400;
        continue;
      }
      // An empty Host is allowed, as in HTTP/1.1 (RFC 9112 3.2); two are not.
      if (host_sent || (!value.empty() && !valid_authority(value, false))) return 400;
      host_sent = true;
      request.host = value;
    }
    request.headers[request.header_count++] = {name, value};
  }
  if (!cookies_.empty()) request.headers[request.header_count++] = {"cookie", view(cookie)};
  if (has_authority_) {
    request.host = authority;
    // Handlers and back ends that look for a Host field find the authority routed on.
    request.headers[request.header_count++] = {"host", request.host};
  }
  if (connect) {
    request.target = request.authority = authority;
  } else {
    std::string_view target = view(path_);
    request.target = target;
    if (target == "*") {
      if (request.method != Method::kOptions) return 400;
      request.raw_path = target;
    } else {
      if (!valid_origin_path(target)) return 400;
      size_t question = target.find('?');
      request.raw_path = target.substr(0, question);
      if (question != std::string_view::npos) request.query = target.substr(question + 1);
    }
  }
  // An HTTP/2 body is delimited by END_STREAM: without a length it is "length unknown", which
  // is what `chunked` means to the handlers.
  if (end_stream) {
    if (request.content_length > 0) return 400;  // announced a body and sent none
  } else if (request.content_length < 0) {
    request.chunked = true;
  }
  return 0;
}

void ResponseFields::clear() {
  storage_.clear();
  fields_.clear();
}

namespace {

// ASCII upper-case letters of eight bytes made lower case, other bytes left alone: 'A'..'Z'
// are the bytes whose low seven bits are at least 'A' and at most 'Z' and whose top bit is clear.
uint64_t lower8(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  const uint64_t low7 = w & (0x7f * kOnes);
  const uint64_t from_a = low7 + (0x80 - 'A') * kOnes;       // top bit set where low7 >= 'A'
  const uint64_t after_z = low7 + (0x80 - 'Z' - 1) * kOnes;  // top bit set where low7 > 'Z'
  const uint64_t upper = from_a & ~after_z & ~w & (0x80 * kOnes);
  return w | (upper >> 2);
}

// A byte at a time this was ~10 instructions per character of every response's field names
// (callgrind); eight at a time, the last eight overlapping when the length is not a multiple.
void copy_lower(char* out, std::string_view in) {
  const size_t n = in.size();
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) out[i] = ascii_lower(in[i]);
    return;
  }
  uint64_t w;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    std::memcpy(&w, in.data() + i, 8);
    w = lower8(w);
    std::memcpy(out + i, &w, 8);
  }
  std::memcpy(&w, in.data() + n - 8, 8);
  w = lower8(w);
  std::memcpy(out + n - 8, &w, 8);
}

}  // namespace

void ResponseFields::add(std::string_view name, std::string_view value) {
  if (is_connection_specific(name)) return;
  Field f;
  f.name_at = static_cast<uint32_t>(storage_.size());
  f.name_length = static_cast<uint32_t>(name.size());
  f.value_at = f.name_at + f.name_length;
  f.value_length = static_cast<uint32_t>(value.size());
  storage_.resize(f.value_at + f.value_length);
  copy_lower(storage_.data() + f.name_at, name);
  if (!value.empty()) std::memcpy(storage_.data() + f.value_at, value.data(), value.size());
  fields_.push_back(f);
}

void ResponseFields::add_lines(std::string_view lines) {
  while (!lines.empty()) {
    size_t eol = lines.find('\n');
    std::string_view line = lines.substr(0, eol);
    lines = eol == std::string_view::npos ? std::string_view() : lines.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) continue;
    add(line.substr(0, colon), trim_ows(line.substr(colon + 1)));
  }
}

}  // namespace peregrine::http2
