// The protocol-neutral request that every handler sees. The HTTP/1 parser fills the head;
// the connection adds the decoded path, the peer and (for handlers that ask) the body.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace peregrine {

enum class Method : uint8_t {
  kGet,
  kHead,
  kPost,
  kPut,
  kDelete,
  kOptions,
  kPatch,
  kTrace,
  kConnect,
  kUnknown,  // any other valid token (PROPFIND, PURGE...): its spelling is in method_text
};

std::string_view method_name(Method method);

struct Header {
  std::string_view name;
  std::string_view value;  // leading and trailing whitespace already stripped
};

// The client connection's TLS session, read by the few handlers that pass its facts on (AJP's
// SSL attributes). tls::Stream implements it, so this header needs no OpenSSL; a Request points
// at one only when the client came over TLS, and nothing is computed until a handler asks.
class TlsSession {
 public:
  virtual std::string_view version() const = 0;  // "TLSv1.3"
  virtual std::string_view cipher() const = 0;   // OpenSSL's name, as mod_ssl's SSL_CIPHER
  virtual int cipher_bits() const = 0;           // the symmetric key's bits in use
  // The session id in upper-case hex (mod_ssl's SSL_SESSION_ID); empty when it has none.
  virtual std::string session_id_hex() const = 0;
  // The certificate the client presented, in PEM; empty when it presented none.
  virtual std::string client_certificate_pem() const = 0;
  // The client certificate's verification, as nginx's $ssl_client_verify and mod_ssl's
  // SSL_CLIENT_VERIFY: "SUCCESS", "FAILED:<OpenSSL's reason>" or "NONE" (none presented, or none
  // asked for: the site's tls.verify_client is off).
  virtual std::string_view client_verify() const = 0;
  // Its subject and issuer (RFC 2253, as nginx's $ssl_client_s_dn), serial number (upper-case
  // hex) and SHA-1 fingerprint (lower-case hex, as $ssl_client_fingerprint); empty without one.
  virtual std::string_view client_subject_dn() const = 0;
  virtual std::string_view client_issuer_dn() const = 0;
  virtual std::string_view client_serial() const = 0;
  virtual std::string_view client_fingerprint() const = 0;

 protected:
  ~TlsSession() = default;
};

// Header fields beyond this count get 431; real clients send a dozen or two.
inline constexpr size_t kMaxHeaders = 100;

struct Request {
  // ---- Filled by the parser (views into the connection's read buffer) ----
  Method method = Method::kUnknown;
  std::string_view method_text;
  std::string_view target;     // request-target exactly as sent
  std::string_view raw_path;   // path part of the target, still percent-encoded
  std::string_view query;      // after '?', without it; empty when absent
  std::string_view authority;  // host[:port] from an absolute-form target
  uint8_t version_minor = 1;   // HTTP/1.<minor>
  uint8_t version_major = 1;   // 2 for a request that came as an HTTP/2 stream
  Header headers[kMaxHeaders];
  uint16_t header_count = 0;

  // Framing and semantics the parser pulls out while it walks the headers.
  std::string_view host;        // Host header, or the authority of an absolute-form target
  int64_t content_length = -1;  // -1: no Content-Length
  bool chunked = false;         // Transfer-Encoding: chunked
  bool keep_alive = true;       // after Connection and the version's default
  bool expect_continue = false;
  bool upgrade = false;  // Connection: upgrade with an Upgrade header
  bool secure = false;   // arrived over TLS (set by the connection): https, HTTPS=on

  // ---- Filled by the connection before routing ----
  std::string_view path;  // percent-decoded, dot-segments removed, starts with '/'
  std::string_view body;  // only for handlers that want a buffered body
  // The client: the socket's peer, or the address a PROXY protocol header or a trusted
  // proxy's X-Forwarded-For/Forwarded named. Logs, limits, allow/deny, FastCGI's REMOTE_ADDR
  // and the proxy's X-Forwarded-For all use this one.
  const sockaddr* peer = nullptr;
  socklen_t peer_len = 0;
  // The socket's own peer (the balancer or proxy when `peer` came from one); equal to `peer`
  // when nothing was forwarded.
  const sockaddr* socket_peer = nullptr;
  socklen_t socket_peer_len = 0;
  std::string_view request_id;  // [request_id]: made or passed on; empty when off
  // The user basic auth accepted (set by the route table; FastCGI's REMOTE_USER, the access
  // log's $remote_user): a view into the configuration's htpasswd users, which live as long as
  // the route table the request holds. Empty: no authentication on the route.
  std::string_view remote_user;
  // The access log's $upstream_addr, $upstream_status and $upstream_response_time, noted by
  // an upstream exchange when a back end's response head arrives (the exchange holds the
  // request as const, hence mutable). The address lives in the configuration snapshot.
  struct UpstreamNote {
    std::string_view address;
    uint16_t status = 0;  // 0: no back end answered
    int32_t time_ms = 0;
  };
  mutable UpstreamNote upstream;
  const sockaddr* local = nullptr;
  socklen_t local_len = 0;
  // The client connection's TLS session (null on a plain one); it lives as long as the
  // connection, so a handler reads it while it starts, not after the client may have gone.
  const TlsSession* tls = nullptr;

  std::span<const Header> header_list() const { return {headers, header_count}; }
  // First header with this name, compared case-insensitively.
  std::optional<std::string_view> header(std::string_view name) const;
  bool has_body() const { return chunked || content_length > 0; }
  bool is_head() const { return method == Method::kHead; }

  // Storage the connection reuses for `path` so decoding allocates nothing once warm.
  std::string path_storage;

  // Resets the parsed state for the next request, keeping storage capacity.
  void clear();
  // Copies `other`, its headers up to header_count only (cheaper than operator= by ~3 KB).
  void assign(const Request& other);
};

}  // namespace peregrine
