// The client side of TLS to back ends (https upstreams): one OpenSSL context per upstream group
// and worker, and the sessions it opens on connected sockets (tls/stream.h does the I/O).
//
// What a connection gets: TLS 1.2 or 1.3; the server's chain verified against the system store
// (Debian's ca-certificates) or a CA file; the name the route names verified in the certificate
// (a DNS name or an IP address, RFC 6125 rules as OpenSSL implements them) and sent as SNI when
// it is a name; ALPN "http/1.1"; an optional client certificate; the last session of the server
// offered again, so that a new connection resumes instead of doing a full handshake.
//
// Sessions: OpenSSL's own client cache is off; each server has a SessionCache that the context's
// new-session callback fills (TLS 1.3 tickets arrive after the handshake, during the first read,
// so SSL_get1_session right after the handshake would miss them). Worker-thread only: no locks.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "tls/stream.h"

namespace peregrine::tls {

struct ClientOptions {
  bool verify = true;
  std::string ca_file;      // "" = the system store
  std::string certificate;  // "" = no client certificate
  std::string key;
};

// The last session a server gave us, to resume with. Must outlive the streams that feed it.
class SessionCache {
 public:
  SessionCache() = default;
  ~SessionCache() { clear(); }
  SessionCache(const SessionCache&) = delete;
  SessionCache& operator=(const SessionCache&) = delete;

  SSL_SESSION* get() const { return session_; }
  // Takes the reference.
  void keep(SSL_SESSION* session);
  void clear();

 private:
  SSL_SESSION* session_ = nullptr;
};

class ClientContext {
 public:
  // Null with *error set when a file cannot be read or does not hold what it should ("the CA
  // file ... : no certificate in it", "the key does not match the certificate").
  static std::unique_ptr<ClientContext> make(const ClientOptions& options, std::string* error);
  ~ClientContext();
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  // A client session on the connected (or connecting) socket `fd`, for the server `name` (DNS
  // name or IP literal: what the certificate must show), resuming `cache`'s session if any and
  // keeping the next one there (`cache` may be null). Null when OpenSSL cannot make a session.
  std::unique_ptr<Stream> open(int fd, const std::string& name, SessionCache* cache) const;

  bool verifies() const { return verify_; }
  SSL_CTX* native() const { return context_; }

  // Why the handshake of `stream` failed: its error, plus the verification result when the
  // certificate was the reason ("certificate has expired", "hostname mismatch").
  static std::string failure_reason(const Stream& stream);

 private:
  ClientContext(SSL_CTX* context, bool verify) : context_(context), verify_(verify) {}
  SSL_CTX* context_;
  bool verify_;
};

}  // namespace peregrine::tls
