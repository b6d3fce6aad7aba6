#include "peregrine/request.h"

#include <algorithm>

namespace peregrine {

std::string_view method_name(Method method) {
  switch (method) {
    case Method::kGet:
      return "GET";
    case Method::kHead:
      return "HEAD";
    case Method::kPost:
      return "POST";
    case Method::kPut:
      return "PUT";
    case Method::kDelete:
      return "DELETE";
    case Method::kOptions:
      return "OPTIONS";
    case Method::kPatch:
      return "PATCH";
    case Method::kTrace:
      return "TRACE";
    case Method::kConnect:
      return "CONNECT";
    case Method::kUnknown:
      break;
  }
  // Not a method name: the request's own spelling is in Request::method_text.
  return "UNKNOWN";
}

namespace {

inline unsigned char Lower(unsigned char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c | 0x20) : c;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(static_cast<unsigned char>(a[i])) != Lower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (uint16_t i = 0; i < header_count; ++i) {
    if (EqualsIgnoreCase(headers[i].name, name)) return headers[i].value;
  }
  return std::nullopt;
}

// Resets what the parser and the connection fill per request. The peer and local addresses
// belong to the connection, not to one request, and are kept; so is path_storage's capacity.
// The headers array is not wiped: header_count = 0 makes its old entries unreachable.
void Request::clear() {
  method = Method::kUnknown;
  method_text = {};
  target = {};
  raw_path = {};
  query = {};
  authority = {};
  version_minor = 1;
  version_major = 1;
  header_count = 0;
  host = {};
  content_length = -1;
  chunked = false;
  keep_alive = true;
  expect_continue = false;
  upgrade = false;
  secure = false;
  path = {};
  body = {};
  request_id = {};
  remote_user = {};
  upstream = {};
  tls = nullptr;
  path_storage.clear();
}

void Request::assign(const Request& other) {
  // Keep in step with the members in request.h (the test RequestAssign.CopiesEveryField).
  method = other.method;
  method_text = other.method_text;
  target = other.target;
  raw_path = other.raw_path;
  query = other.query;
  authority = other.authority;
  version_minor = other.version_minor;
  version_major = other.version_major;
  std::copy(other.headers, other.headers + other.header_count, headers);
  header_count = other.header_count;
  host = other.host;
  content_length = other.content_length;
  chunked = other.chunked;
  keep_alive = other.keep_alive;
  expect_continue = other.expect_continue;
  upgrade = other.upgrade;
  secure = other.secure;
  path_storage = other.path_storage;
  path =
      other.path.data() == other.path_storage.data() ? std::string_view(path_storage) : other.path;
  body = other.body;
  peer = other.peer;
  peer_len = other.peer_len;
  socket_peer = other.socket_peer;
  socket_peer_len = other.socket_peer_len;
  request_id = other.request_id;
  remote_user = other.remote_user;
  upstream = other.upstream;
  local = other.local;
  local_len = other.local_len;
  tls = other.tls;
}

}  // namespace peregrine
