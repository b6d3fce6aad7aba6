// The PROXY protocol (HAProxy's spec, versions 1 and 2): the header a load balancer sends before
// the client's bytes to say whom the connection is really from. Pure: bytes in, a result out.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace peregrine::http {

// v1 lines are at most 107 bytes (spec 2.1). v2 may carry up to 64 KiB of TLVs; real balancers
// send a few hundred bytes, so more than this is refused rather than buffered.
inline constexpr size_t kProxyV1MaxLength = 107;
inline constexpr size_t kProxyMaxLength = 4096;

enum class ProxyStatus : uint8_t { kNeedMore, kError, kDone };

struct ProxyHeader {
  ProxyStatus status = ProxyStatus::kNeedMore;
  uint8_t version = 0;  // 1 or 2 once known
  size_t length = 0;    // kDone: bytes the header took, the client's bytes start after them
  // kDone: false for v2's LOCAL command, v1's UNKNOWN and v2's AF_UNSPEC/AF_UNIX: the
  // connection then keeps the socket's own addresses (a health check, or nothing to tell).
  bool has_address = false;
  sockaddr_storage source{};
  socklen_t source_len = 0;
  sockaddr_storage destination{};
  socklen_t destination_len = 0;
  const char* error = "";  // kError: what was wrong, for a log line
};

// `bytes` is everything received so far. kNeedMore while a valid header may still complete;
// kError as soon as it cannot (wrong signature, bad syntax, too long).
ProxyHeader parse_proxy_header(std::string_view bytes);

}  // namespace peregrine::http
