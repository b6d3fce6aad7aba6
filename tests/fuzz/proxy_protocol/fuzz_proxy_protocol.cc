// libFuzzer target for the PROXY protocol parser (v1 and v2) and the forwarded-address resolver.
//
// For every input it checks, and traps on violation:
//   - kDone: the header length is within the input and the limits, a v1 header ends in CRLF,
//     an address is AF_INET/AF_INET6 with the matching length;
//   - resumption: every prefix shorter than a kDone header is kNeedMore, and no prefix of an
//     input is kError unless the whole input is (a verdict never depends on bytes not yet here);
//   - the resolver: X-Forwarded-For and Forwarded values built from the input never crash and
//     return an IP address when they return one.
// Built with -fsanitize=fuzzer for fuzzing, and linked with tests/fuzz/replay_main.cc to replay
// the corpus in ordinary test runs.
#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/client_address.h"
#include "http/proxy_protocol.h"

namespace {

using peregrine::http::ProxyHeader;
using peregrine::http::ProxyStatus;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

void check_address(const sockaddr_storage& address, socklen_t length) {
  if (address.ss_family == AF_INET) {
    check(length == sizeof(sockaddr_in));
  } else {
    check(address.ss_family == AF_INET6 && length == sizeof(sockaddr_in6));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const ProxyHeader whole = peregrine::http::parse_proxy_header(input);
  if (whole.status == ProxyStatus::kDone) {
    check(whole.length > 0 && whole.length <= size &&
          whole.length <= peregrine::http::kProxyMaxLength);
    if (whole.version == 1) {
      check(whole.length <= peregrine::http::kProxyV1MaxLength);
      check(input[whole.length - 2] == '\r' && input[whole.length - 1] == '\n');
    }
    if (whole.has_address) {
      check_address(whole.source, whole.source_len);
      check_address(whole.destination, whole.destination_len);
    }
    // Any shorter prefix is incomplete, never an error and never done.
    for (size_t cut : {size_t{0}, whole.length / 2, whole.length - 1}) {
      if (cut >= whole.length) continue;
      check(peregrine::http::parse_proxy_header(input.substr(0, cut)).status ==
            ProxyStatus::kNeedMore);
    }
    // Bytes after the header do not change it.
    const ProxyHeader head_only =
        peregrine::http::parse_proxy_header(input.substr(0, whole.length));
    check(head_only.status == ProxyStatus::kDone && head_only.length == whole.length);
  } else if (whole.status == ProxyStatus::kNeedMore) {
    for (size_t cut = 0; cut < size; cut += 1 + size / 8)
      check(peregrine::http::parse_proxy_header(input.substr(0, cut)).status ==
            ProxyStatus::kNeedMore);
  }

  static const peregrine::Cidr kTrusted[] = {*peregrine::Cidr::parse("10.0.0.0/8", nullptr),
                                             *peregrine::Cidr::parse("::1", nullptr)};
  const peregrine::Header headers[] = {{"X-Forwarded-For", input}, {"Forwarded", input}};
  for (auto which : {peregrine::http::ForwardedHeader::kXForwardedFor,
                     peregrine::http::ForwardedHeader::kForwarded}) {
    sockaddr_storage out;
    socklen_t length = 0;
    if (peregrine::http::forwarded_client(headers, which, kTrusted, &out, &length))
      check_address(out, length);
  }
  return 0;
}
