// libFuzzer target for the proxy's request path: a client request, as the server accepts it, is
// turned into the head sent upstream (proxy::append_request_head), and that head must parse as
// exactly the one request that was routed and checked (issue 49: request smuggling through
// Upgrade bodies, Host confusion, HTTP/2 pseudo-headers copied into a request line).
//
// Input: byte 0 picks the options, the rest is the request.
//   bit 0     0: the rest is HTTP/1 bytes, through http1::RequestParser;
//             1: the rest is HTTP/2 header fields (byte 1: bit 0 END_STREAM; then per field a
//                length byte, the name, a length byte, the value), through the session's field
//                checks and http2::RequestHeadBuilder, as src/http2/session/session.cc does.
//   bits 1-2  Host mode: pass, upstream, fixed, pass.
//   bits 3-4  forwarding headers: the defaults (fast path), none, all with Forwarded (general
//             path), the defaults plus a route rule (general path).
//   bits 5-6  path mapping: none, "/api" -> "/backend", "/api/" stripped, "/" -> "/v2/"; applied
//             only when the route's prefix matches the normalized path, as RouteTable::select
//             would pick that route.
//   bit 7     the route tunnels WebSocket (an Upgrade request becomes a tunnel).
// A request the server would refuse (parser error, 400 from path normalization, the session's
// field checks, the builder's verdict) ends the input: only accepted requests are forwarded.
//
// The forwarded head, parsed by a fresh strict RequestParser, must be kDone over the whole output
// (one head, nothing after it) with: the client's method; a target of the raw path (mapped) and
// the query; Host = the authority routed on (pass mode), the upstream's or the fixed one; the
// client's body framing (Content-Length, or chunked iff the client's was), exactly one framing
// field at most; no Upgrade unless tunnelling and never h2c; no HTTP2-Settings, Expect or
// Proxy-Connection. The fast header path must write the general path's bytes. Any violation
// traps. Built with -fsanitize=fuzzer for fuzzing, and linked with tests/fuzz/replay_main.cc to
// replay the corpus in every build.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/strings.h"
#include "handlers/proxy/headers.h"
#include "handlers/proxy/request_head.h"
#include "http/http1/parser.h"
#include "http/path.h"
#include "http2/headers.h"
#include "http2/hpack/decoder.h"

namespace {

using peregrine::ascii_iequals;
using peregrine::Header;
using peregrine::kMaxHeaders;
using peregrine::Request;
namespace http1 = peregrine::http1;
namespace http2 = peregrine::http2;
namespace proxy = peregrine::proxy;

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

// Named findings the run is told to step over: "dot-segments" (a mapped raw path whose
// dot-segments climb out of the replacement), "connection-host" (a client's "Connection: host"
// drops the Host routed on), "h2-ctl" (an HTTP/2 field value with a control byte other than
// NUL, CR, LF is copied into the HTTP/1.1 head, which a strict back end refuses).
bool Known(const char* finding) {
  static const char* known = std::getenv("PEREGRINE_FUZZ_KNOWN");
  return known != nullptr && std::strstr(known, finding) != nullptr;
}

constexpr std::string_view kUpstreamHost = "127.0.0.1:8080";
constexpr std::string_view kFixedHost = "fixed.example";

struct Mapping {
  std::string_view prefix;
  std::string_view replacement;
};
// As config.cc builds them: the route's pattern is the prefix; a path in `proxy` or
// strip_prefix (an empty replacement) turns the mapping on.
constexpr Mapping kMappings[] = {{"", ""}, {"/api", "/backend"}, {"/api/", ""}, {"/", "/v2/"}};

// The session's per-field checks before a field reaches the builder (session.cc: valid_field,
// connection-specific fields but "te: trailers", RFC 9113 8.3.1's pseudo-header order).
class SessionFieldChecks {
 public:
  bool add(std::string_view name, std::string_view value) {
    if (!peregrine::http2::hpack::valid_field(name, value)) return false;
    if (http2::is_connection_specific(name) && !(name == "te" && value == "trailers")) return false;
    if (name.front() != ':') {
      regular_seen_ = true;
      return true;
    }
    if (regular_seen_) return false;
    unsigned bit = 0;
    if (name == ":method") {
      bit = 1;
      connect_ = value == "CONNECT";
    } else if (name == ":scheme") {
      bit = 2;
    } else if (name == ":path") {
      bit = 4;
      if (value.empty()) return false;
    } else if (name == ":authority") {
      bit = 8;
    }
    if (bit == 0 || (seen_ & bit)) return false;
    seen_ |= bit;
    return true;
  }
  bool complete() const { return connect_ ? seen_ == (1 | 8) : (seen_ & 7) == 7; }

 private:
  unsigned seen_ = 0;
  bool regular_seen_ = false;
  bool connect_ = false;
};

// A control byte HTTP/1.1 refuses in a field value (RFC 9110 5.5: a CTL but HTAB).
bool HasCtl(std::string_view value) {
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  }
  return false;
}

// Decodes the HTTP/2 form of the input into `request` (views into `builder`). False when the
// session or the builder refuses the request.
bool BuildHttp2(std::string_view in, http2::RequestHeadBuilder& builder, Request& request) {
  if (in.empty()) return false;
  const bool end_stream = (in[0] & 1) != 0;
  in.remove_prefix(1);
  builder.reset();
  SessionFieldChecks checks;
  int64_t content_length = -1;
  while (!in.empty()) {
    size_t n = static_cast<unsigned char>(in[0]);
    if (in.size() < 1 + n + 1) return false;
    std::string_view name = in.substr(1, n);
    in.remove_prefix(1 + n);
    size_t v = static_cast<unsigned char>(in[0]);
    if (in.size() < 1 + v) return false;
    std::string_view value = in.substr(1, v);
    in.remove_prefix(1 + v);
    if (!checks.add(name, value)) return false;
    if (Known("h2-ctl") && HasCtl(value)) return false;
    if (name == "content-length") {
      content_length = -1;
      if (!value.empty() && value.size() <= 18 &&
          value.find_first_not_of("0123456789") == std::string_view::npos)
        content_length = static_cast<int64_t>(std::stoll(std::string(value)));
    }
    if (!builder.add(name, value)) return false;
  }
  if (!checks.complete()) return false;
  if (end_stream && content_length > 0) return false;  // the session's PROTOCOL_ERROR
  return builder.finish(request, end_stream) == 0;
}

// RouteTable::select's path step: "*" is answered by the server itself, a path that does not
// normalize is a 400; neither reaches a handler.
bool NormalizePath(Request& request) {
  if (request.target == "*") return false;
  if (peregrine::http::path_is_normal(request.raw_path)) {
    request.path = request.raw_path;
    return true;
  }
  if (peregrine::http::normalize_path(request.raw_path, request.path_storage) !=
      peregrine::http::PathStatus::kOk)
    return false;
  request.path = request.path_storage;
  return true;
}

proxy::RequestOptions Options(uint8_t flags) {
  proxy::RequestOptions options;
  switch ((flags >> 1) & 3) {
    case 1:
      options.host_mode = proxy::HostMode::kUpstream;
      break;
    case 2:
      options.host_mode = proxy::HostMode::kFixed;
      options.fixed_host = std::string(kFixedHost);
      break;
    default:
      options.host_mode = proxy::HostMode::kPass;
  }
  proxy::ForwardingOptions& fwd = options.forwarding;
  switch ((flags >> 3) & 3) {
    case 1:
      fwd = {false, false, false, false, false};
      break;
    case 2:
      fwd = {true, true, true, true, true};
      break;
    case 3:
      options.rules.add.push_back({"X-Route", "proxied"});
      break;
    default:
      break;
  }
  return options;
}

size_t Count(const Request& r, std::string_view name) {
  size_t n = 0;
  for (const Header& h : r.header_list()) n += ascii_iequals(h.name, name) ? 1 : 0;
  return n;
}

bool InList(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (ascii_iequals(peregrine::trim_ows(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

bool ConnectionNames(const Request& r, std::string_view name) {
  for (const Header& h : r.header_list()) {
    if (ascii_iequals(h.name, "Connection") && InList(h.value, name)) return true;
  }
  return false;
}

bool OffersH2c(std::string_view value) {
  return InList(value, "h2c");
}

// What the mapping turns the request's path into: `raw` (the client's spelling) when the
// prefix is found there, else (or when the raw spelling has dot-segments) the decoded path
// mapped and percent-encoded again. CheckBackEndPath says where either must arrive.
void CheckTarget(const Request& request, const Mapping& m, bool mapped,
                 std::string_view forwarded_path) {
  const std::string_view raw = request.raw_path.empty() ? "/" : request.raw_path;
  if (!mapped) {
    FUZZ_CHECK(forwarded_path == raw);
    return;
  }
  if (auto by_raw = proxy::map_path(raw, m.prefix, m.replacement);
      by_raw && forwarded_path == *by_raw)
    return;
  if (auto by_path = proxy::map_path(request.path, m.prefix, m.replacement)) {
    auto decoded = peregrine::http::percent_decode(forwarded_path, false);
    FUZZ_CHECK(decoded && *decoded == *by_path);
    return;
  }
  FUZZ_CHECK(forwarded_path == raw);
}

// A back end normalizes the path it receives: it must arrive where the route was checked, the
// normalized path mapped. A raw path mapped as spelled keeps its dot-segments, which may climb
// out of the replacement ("/api/../api/x" to "/backend/../api/x").
void CheckBackEndPath(const Request& request, const Mapping& m, bool mapped,
                      std::string_view forwarded_path) {
  if (Known("dot-segments")) return;
  std::string decoded(request.path);
  if (mapped) {
    if (auto by_path = proxy::map_path(request.path, m.prefix, m.replacement)) decoded = *by_path;
  }
  // The routed path is decoded already: a '%' in it is literal ("%25" sent), and must stay one
  // when normalize_path decodes what it is compared with.
  std::string expected;
  for (char c : decoded) {
    if (c == '%') {
      expected += "%25";
    } else {
      expected += c;
    }
  }
  std::string seen;
  FUZZ_CHECK(peregrine::http::normalize_path(forwarded_path, seen) ==
             peregrine::http::PathStatus::kOk);
  std::string wanted;
  FUZZ_CHECK(peregrine::http::normalize_path(expected, wanted) == peregrine::http::PathStatus::kOk);
  FUZZ_CHECK(seen == wanted);
}

void Forward(uint8_t flags, Request& request) {
  if (!NormalizePath(request)) return;

  const Mapping& m = kMappings[(flags >> 5) & 3];
  const bool mapped = !m.prefix.empty() && request.path.starts_with(m.prefix);
  const proxy::PathMapping mapping{mapped, m.prefix, m.replacement};
  const bool websocket = (flags & 0x80) != 0;
  proxy::RequestContext context;
  // Bits shared with the options: IPv6 only matters to Forwarded's quoting, which bit 4 turns on.
  context.client_ip = (flags & 8) ? "2001:db8::1" : "192.0.2.7";
  context.scheme = (flags & 4) ? "https" : "http";
  context.upstream_host = kUpstreamHost;
  context.tunnel = request.upgrade && websocket;  // proxy_handler.cc: begin()
  const proxy::RequestOptions options = Options(flags);

  static std::string out;
  static std::vector<proxy::HeaderView> scratch;
  out.clear();
  proxy::append_request_head(out, request, mapping, context, options, scratch);

  // The fast header path promises the general path's bytes.
  {
    std::vector<proxy::HeaderView> fields;
    for (const Header& h : request.header_list()) {
      if (ascii_iequals(h.name, "Content-Length") || ascii_iequals(h.name, "Expect")) continue;
      fields.push_back({h.name, h.value});
    }
    std::string fast;
    if (proxy::append_request_headers_fast(fast, fields, context, options)) {
      std::string general;
      proxy::append_header_block(general, proxy::rewrite_request_headers(fields, context, options));
      FUZZ_CHECK(fast == general);
    }
  }

  // The back end's view: a strict parser with room for the fields we add.
  http1::ParserLimits limits;
  limits.max_head_bytes = 1 << 20;
  limits.max_target_bytes = 1 << 20;
  http1::RequestParser parser(limits);
  static Request up;
  up.clear();
  const http1::ParseResult res = parser.parse(out, up);
  if (res.status == http1::ParseStatus::kError && res.error_status == 431 &&
      request.header_count + size_t{8} > kMaxHeaders)
    return;  // the client's 100 fields plus ours: the back end refuses, nothing is smuggled
  FUZZ_CHECK(res.status == http1::ParseStatus::kDone);
  FUZZ_CHECK(res.head_length == out.size());
  FUZZ_CHECK(up.version_minor == 1);

  FUZZ_CHECK(up.method_text == request.method_text);
  FUZZ_CHECK(up.authority.empty());  // origin-form
  const std::string_view target = up.target;
  const size_t question = target.find('?');
  CheckTarget(request, m, mapped, target.substr(0, question));
  CheckBackEndPath(request, m, mapped, target.substr(0, question));
  if (request.query.empty()) {
    FUZZ_CHECK(question == std::string_view::npos);
  } else {
    FUZZ_CHECK(question != std::string_view::npos && target.substr(question + 1) == request.query);
  }

  FUZZ_CHECK(Count(up, "Host") == 1);
  switch (options.host_mode) {
    case proxy::HostMode::kPass:
      if (Known("connection-host") && ConnectionNames(request, "Host")) break;
      FUZZ_CHECK(up.host == (request.host.empty() ? kUpstreamHost : request.host));
      break;
    case proxy::HostMode::kUpstream:
      FUZZ_CHECK(up.host == kUpstreamHost);
      break;
    case proxy::HostMode::kFixed:
      FUZZ_CHECK(up.host == kFixedHost);
      break;
  }

  // Framing: the client's, whatever else the request asks for.
  if (request.chunked) {
    FUZZ_CHECK(up.chunked && up.content_length == -1);
    FUZZ_CHECK(Count(up, "Transfer-Encoding") == 1 && Count(up, "Content-Length") == 0);
  } else if (request.content_length >= 0) {
    FUZZ_CHECK(!up.chunked && up.content_length == request.content_length);
    FUZZ_CHECK(Count(up, "Content-Length") == 1 && Count(up, "Transfer-Encoding") == 0);
  } else {
    FUZZ_CHECK(!up.chunked && up.content_length == -1);
    FUZZ_CHECK(Count(up, "Content-Length") == 0 && Count(up, "Transfer-Encoding") == 0);
  }

  // Upgrade only for a tunnel, never h2c; nothing of HTTP/1.1's h2c upgrade or of 100-continue.
  FUZZ_CHECK(up.upgrade == context.tunnel);
  for (const Header& h : up.header_list()) {
    if (ascii_iequals(h.name, "Upgrade")) FUZZ_CHECK(context.tunnel && !OffersH2c(h.value));
    FUZZ_CHECK(!ascii_iequals(h.name, "HTTP2-Settings"));
    FUZZ_CHECK(!ascii_iequals(h.name, "Expect"));
    FUZZ_CHECK(!ascii_iequals(h.name, "Proxy-Connection"));
    FUZZ_CHECK(!ascii_iequals(h.name, "Keep-Alive"));
  }
  FUZZ_CHECK(!up.expect_continue);
  if (!context.tunnel) FUZZ_CHECK(up.keep_alive && Count(up, "Connection") == 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  static Request request;
  request.clear();
  if (flags & 1) {
    static http2::RequestHeadBuilder builder;
    if (!BuildHttp2(in, builder, request)) return 0;
  } else {
    http1::RequestParser parser;
    const http1::ParseResult res = parser.parse(in, request);
    if (res.status != http1::ParseStatus::kDone) return 0;
  }
  Forward(flags, request);
  return 0;
}
