// The server side of TLS for one configuration snapshot in one worker: an SSL_CTX per site with
// a certificate (ECDSA and RSA side by side in one context), SNI choosing among them, ALPN,
// session tickets with rotating keys, a session cache, OCSP staples.
//
// Built per worker with its RouteTable, so each worker's session cache is its own: OpenSSL's
// cache lock is only ever taken by one thread, never contended, and no lock is shared between
// workers. Tickets work across workers (and across instances with ticket key files) because
// every worker derives or loads the same keys.
//
// Reload: a new snapshot builds new contexts; an SSL session holds a reference on its SSL_CTX,
// so connections made before keep the old certificate until they close. The callbacks find
// this object through the contexts' app data: a connection keeps its RouteTable (and so this
// object) alive until its handshake is done, the only time callbacks run.
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "tls/stream.h"

namespace peregrine::tls {

// ALPN: what the server picks from the client's list (wire format: length-prefixed names).
// "h2" only when `offer_h2`; "http/1.1" when offered; else "" (no ALPN: the client decides).
std::string_view select_alpn(std::span<const unsigned char> client_list, bool offer_h2);

// SNI: the context for `server_name` (exact host names first, then wildcards, as Host picks a
// site). `site_context[i]` is site i's context, or -1 when it has no certificate; those, and
// names no site claims, get `fallback`.
size_t pick_context(const config::Config& config, const std::vector<int>& site_context,
                    size_t fallback, std::string_view server_name);

// The host name of a ClientHello's server_name extension (its body, as
// SSL_client_hello_get0_ext gives it); "" when it names none or is malformed (OpenSSL then
// rejects it itself).
std::string_view server_name_of(std::span<const unsigned char> extension);

// Client certificates, per request, for the site Host chose (nginx's order: the handshake asks
// with the SNI site's settings, the request is judged by its own site's): 0 serves it; 421 when
// the site verifies clients but the handshake was made for another site's context (whose CA, or
// lack of one, says nothing for this site); 400 under "on" without a verified certificate, and
// under "optional" for a certificate that did not verify. "optional_no_ca" never refuses.
int client_certificate_status(config::SiteTls::VerifyClient mode, bool same_context, bool presented,
                              bool verified);

// A session ticket key: 80 bytes, as in a ticket key file: the key's name (sent in the ticket),
// the HMAC-SHA256 secret and the AES-256 key.
struct TicketKey {
  unsigned char name[16];
  unsigned char hmac[32];
  unsigned char aes[32];
};
bool parse_ticket_key(std::string_view bytes, TicketKey* out);

class ServerContexts {
 public:
  // Null with `error` empty when no listener of `config` is TLS; null with `error` set when a
  // context cannot be built (the configuration was checked on load, so: out of memory).
  static std::unique_ptr<ServerContexts> build(std::shared_ptr<const config::Config> config,
                                               std::string* error);
  ~ServerContexts();
  ServerContexts(const ServerContexts&) = delete;
  ServerContexts& operator=(const ServerContexts&) = delete;

  // A server session on an accepted socket, or null (out of memory).
  // ALPN "h2" is chosen when `offer_h2` and the client offers it.
  std::unique_ptr<Stream> accept(int fd, bool offer_h2) const;

  // client_certificate_status for a request on `stream` to `site` (an index into the sites);
  // *why gets the reason for a log line when it is not 0.
  int check_client(const Stream& stream, size_t site, std::string_view* why) const;

  // The encryption key, then those that still decrypt (used by the ticket callback).
  std::span<const TicketKey> ticket_keys(int64_t now_seconds);

 private:
  ServerContexts() = default;
  SSL_CTX* make_context(const config::Site* site, std::string* error);
  static int on_server_name(SSL* ssl, int* alert, void* arg);
  static int on_client_hello(SSL* ssl, int* alert, void* arg);
  void use_context(SSL* ssl, std::string_view server_name) const;
  static int on_alpn(SSL* ssl, const unsigned char** out, unsigned char* out_length,
                     const unsigned char* in, unsigned int in_length, void* arg);
  static int on_ticket(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                       EVP_MAC_CTX* mac, int encrypt);
  static int on_status(SSL* ssl, void* arg);

  std::shared_ptr<const config::Config> config_;
  std::vector<SSL_CTX*> contexts_;  // one per site with certificates
  std::vector<const config::Site*> context_site_;
  std::vector<int> site_context_;  // per site: index into contexts_, or -1
  size_t default_context_ = 0;
  // Ticket keys: the configured ones, or ones derived from a per-process secret for the
  // current and previous rotation periods (the same in every worker, no sharing needed).
  std::vector<TicketKey> keys_;
  int64_t keys_period_ = -1;
  bool keys_from_files_ = false;
};

}  // namespace peregrine::tls
