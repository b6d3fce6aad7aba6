#include "tls/server_context.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "http/router.h"

namespace peregrine::tls {

namespace {

// Mozilla's "intermediate" TLS 1.2 list: forward secrecy and AEAD only.
constexpr const char* kDefaultCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.3 suites in Mozilla's order, where OpenSSL's own puts AES-256 first: AES-128-GCM is as
// safe for this use, and with its SHA-256 transcript it costs less per record and per handshake
// (callgrind: a full handshake ~4 % fewer instructions).
constexpr const char* kDefaultCiphersuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* kDefaultCurves = "X25519:P-256:P-384";
constexpr unsigned char kSessionContext[] = "peregrine";

// A session's app data says whether its listener serves HTTP/2 (see accept()).
char offer_h2_marker;

// The secret behind the derived ticket keys: one per process, made on first use (a thread-safe
// static), so every worker derives the same keys and resumes the others' tickets.
const unsigned char* process_secret() {
  static const auto secret = [] {
    std::array<unsigned char, 32> bytes{};
    RAND_bytes(bytes.data(), static_cast<int>(bytes.size()));
    return bytes;
  }();
  return secret.data();
}

TicketKey derive_key(int64_t period) {
  unsigned char material[96];
  for (unsigned char part = 0; part < 3; ++part) {
    unsigned char input[16] = "pg-ticket-key";
    std::memcpy(input + 13, &part, 1);
    unsigned char seed[24];
    std::memcpy(seed, input, 16);
    std::memcpy(seed + 16, &period, 8);
    unsigned int length = 32;
    HMAC(EVP_sha256(), process_secret(), 32, seed, sizeof seed, material + part * 32, &length);
  }
  TicketKey key;
  std::memcpy(&key, material, sizeof key);
  return key;
}

bool load_certificate(SSL_CTX* ctx, const config::TlsCertificate& certificate) {
  BIO* chain =
      BIO_new_mem_buf(certificate.chain_pem.data(), static_cast<int>(certificate.chain_pem.size()));
  if (!chain) return false;
  X509* leaf = PEM_read_bio_X509(chain, nullptr, nullptr, nullptr);
  bool ok = leaf && SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  // The intermediates go with the certificate just set: ECDSA and RSA keep their own chains.
  while (ok) {
    X509* next = PEM_read_bio_X509(chain, nullptr, nullptr, nullptr);
    if (!next) break;
    if (SSL_CTX_add0_chain_cert(ctx, next) != 1) {
      X509_free(next);
      ok = false;
    }
  }
  BIO_free(chain);
  ERR_clear_error();  // the end of the PEM data
  if (!ok) return false;
  BIO* key_bio =
      BIO_new_mem_buf(certificate.key_pem.data(), static_cast<int>(certificate.key_pem.size()));
  EVP_PKEY* key = key_bio ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  ok = key && SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  BIO_free(key_bio);
  return ok;
}

// Accepts every chain: the handshake completes and the result stays in the session
// (SSL_get_verify_result), so a request without a valid certificate gets a 400 and a log line
// saying why, as nginx does, instead of a bare handshake alert.
int accept_any_chain(int /*preverify_ok*/, X509_STORE_CTX* /*store*/) {
  return 1;
}

// The trusted CAs into the context's store, and their names into the CertificateRequest.
bool load_client_ca(SSL_CTX* ctx, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!bio) return false;
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  bool ok = names != nullptr;
  while (ok) {
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (!ca) break;
    X509_NAME* name = X509_NAME_dup(X509_get_subject_name(ca));
    ok = X509_STORE_add_cert(store, ca) == 1 && name && sk_X509_NAME_push(names, name) > 0;
    if (!ok) X509_NAME_free(name);
    X509_free(ca);
  }
  BIO_free(bio);
  ERR_clear_error();  // the end of the PEM data
  if (ok) {
    SSL_CTX_set_client_CA_list(ctx, names);  // takes the list
  } else {
    sk_X509_NAME_pop_free(names, X509_NAME_free);
  }
  return ok;
}

// A session resumes only in a context of the same id: a site verifying clients gets one of its
// own, made of its CA bundle and settings, so a session verified for another site (or not
// verified at all) never resumes into it, and a reload that changes the CAs ends resumption.
void set_session_context(SSL_CTX* ctx, const config::SiteTls& tls) {
  if (tls.verify_client == config::SiteTls::VerifyClient::kOff) {
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
    return;
  }
  std::string material = tls.client_ca;
  material += static_cast<char>(tls.verify_client);
  material += static_cast<char>(tls.verify_depth);
  for (const config::TlsCertificate& certificate : tls.certificates)
    material += certificate.chain_pem;
  unsigned char digest[32];
  unsigned int length = sizeof digest;
  EVP_Digest(material.data(), material.size(), digest, &length, EVP_sha256(), nullptr);
  SSL_CTX_set_session_id_context(ctx, digest, std::min<unsigned int>(length, 32));
}

}  // namespace

std::string_view server_name_of(std::span<const unsigned char> extension) {
  // ServerNameList: a 2-byte length, then entries of a type byte and a 2-byte-length name.
  if (extension.size() < 5) return "";
  const size_t list = size_t{extension[0]} << 8 | extension[1];
  if (list + 2 != extension.size() || extension[2] != TLSEXT_NAMETYPE_host_name) return "";
  const size_t length = size_t{extension[3]} << 8 | extension[4];
  if (length == 0 || 5 + length > extension.size()) return "";
  return {reinterpret_cast<const char*>(extension.data() + 5), length};
}

int client_certificate_status(config::SiteTls::VerifyClient mode, bool same_context, bool presented,
                              bool verified) {
  using Verify = config::SiteTls::VerifyClient;
  if (mode == Verify::kOff) return 0;
  if (!same_context) return 421;
  if (mode == Verify::kOptionalNoCa) return 0;
  if (!presented) return mode == Verify::kOn ? 400 : 0;
  return verified ? 0 : 400;
}

std::string_view select_alpn(std::span<const unsigned char> client_list, bool offer_h2) {
  bool http11 = false;
  for (size_t i = 0; i < client_list.size();) {
    size_t length = client_list[i];
    if (i + 1 + length > client_list.size()) return "";  // malformed: no ALPN
    std::string_view name(reinterpret_cast<const char*>(client_list.data() + i + 1), length);
    if (offer_h2 && name == "h2") return "h2";  // the server's preference
    if (name == "http/1.1") http11 = true;
    i += 1 + length;
  }
  return http11 ? "http/1.1" : "";
}

size_t pick_context(const config::Config& config, const std::vector<int>& site_context,
                    size_t fallback, std::string_view server_name) {
  if (server_name.empty()) return fallback;
  size_t site = http::select_site(config, server_name);
  if (site < site_context.size() && site_context[site] >= 0)
    return static_cast<size_t>(site_context[site]);
  return fallback;
}

bool parse_ticket_key(std::string_view bytes, TicketKey* out) {
  if (bytes.size() != sizeof(TicketKey)) return false;
  std::memcpy(out->name, bytes.data(), 16);
  std::memcpy(out->hmac, bytes.data() + 16, 32);
  std::memcpy(out->aes, bytes.data() + 48, 32);
  return true;
}

std::unique_ptr<ServerContexts> ServerContexts::build(std::shared_ptr<const config::Config> config,
                                                      std::string* error) {
  error->clear();
  bool any_tls = false;
  for (const config::ListenAddress& listen : config->listen) any_tls |= listen.tls;
  if (!any_tls) return nullptr;
  std::unique_ptr<ServerContexts> self(new ServerContexts());
  self->config_ = config;
  self->site_context_.assign(config->sites.size(), -1);
  for (size_t i = 0; i < config->sites.size(); ++i) {
    const config::Site& site = config->sites[i];
    if (site.tls.certificates.empty()) continue;
    SSL_CTX* ctx = self->make_context(&site, error);
    if (!ctx) return nullptr;
    self->site_context_[i] = static_cast<int>(self->contexts_.size());
    self->contexts_.push_back(ctx);
    self->context_site_.push_back(&site);
  }
  if (self->contexts_.empty()) {
    *error = "a TLS listener, but no site has a certificate";
    return nullptr;
  }
  int default_context = self->site_context_[config->default_site];
  self->default_context_ = default_context >= 0 ? static_cast<size_t>(default_context) : 0;
  for (const std::string& bytes : config->tls.ticket_keys) {
    TicketKey key;
    if (parse_ticket_key(bytes, &key)) self->keys_.push_back(key);
  }
  self->keys_from_files_ = !self->keys_.empty();
  return self;
}

ServerContexts::~ServerContexts() {
  for (SSL_CTX* ctx : contexts_) SSL_CTX_free(ctx);  // sessions still open hold their own ref
}

SSL_CTX* ServerContexts::make_context(const config::Site* site, std::string* error) {
  const config::TlsOptions& options = config_->tls;
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) {
    *error = "cannot create a TLS context";
    return nullptr;
  }
  auto fail = [&](std::string what) {
    unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code) what += std::string(": ") + ERR_reason_error_string(code);
    *error = what;
    SSL_CTX_free(ctx);
    return nullptr;
  };
  SSL_CTX_set_min_proto_version(ctx, options.tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, options.tls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  uint64_t flags = SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                   SSL_OP_NO_COMPRESSION | SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF;
  if (!options.tickets) flags |= SSL_OP_NO_TICKET;
  SSL_CTX_set_options(ctx, flags);
  // One TLS 1.3 ticket per handshake, as H2O and Go send, where OpenSSL sends two: each ticket
  // costs a session encoding, its encryption and a write(2), a tenth of a full handshake's
  // user time here, and a ticket stays usable for the next connection (it is not single-use).
  SSL_CTX_set_num_tickets(ctx, 1);
  // An idle keep-alive connection keeps no read or write buffer; output queued in a std::string
  // may move between retries of one SSL_write; a large write returns after each record.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_ENABLE_PARTIAL_WRITE);
  // Without read-ahead OpenSSL reads each record in two read(2)s (its 5-byte header, then the
  // rest) and ends on a third that says EAGAIN; with it, one read takes whatever the client sent
  // (its Finished and its request arrive together). Connection reads until SSL_read wants more,
  // so bytes read ahead are never left waiting for an edge.
  SSL_CTX_set_read_ahead(ctx, 1);
  const std::string ciphers = options.ciphers.empty() ? kDefaultCiphers : options.ciphers;
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) return fail("tls.ciphers");
  const std::string suites =
      options.ciphersuites.empty() ? kDefaultCiphersuites : options.ciphersuites;
  if (SSL_CTX_set_ciphersuites(ctx, suites.c_str()) != 1) return fail("tls.ciphersuites");
  const std::string curves = options.curves.empty() ? kDefaultCurves : options.curves;
  if (SSL_CTX_set1_groups_list(ctx, curves.c_str()) != 1) return fail("tls.curves");
  for (const config::TlsCertificate& certificate : site->tls.certificates) {
    if (!load_certificate(ctx, certificate))
      return fail("certificate " + certificate.certificate_path);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return fail("key");
  set_session_context(ctx, site->tls);
  if (site->tls.verify_client != config::SiteTls::VerifyClient::kOff) {
    // Asked at the handshake, TLS 1.2 and 1.3 alike (no post-handshake authentication).
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any_chain);
    SSL_CTX_set_verify_depth(ctx, site->tls.verify_depth);
    if (!site->tls.client_ca.empty() && !load_client_ca(ctx, site->tls.client_ca))
      return fail("client_ca");
  }
  if (options.session_cache == 0) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, options.session_cache);
  }
  SSL_CTX_set_timeout(ctx, static_cast<long>(options.session_timeout.count() / 1000));
  SSL_CTX_set_app_data(ctx, this);
  SSL_CTX_set_client_hello_cb(ctx, on_client_hello, this);
  SSL_CTX_set_tlsext_servername_callback(ctx, on_server_name);
  SSL_CTX_set_tlsext_servername_arg(ctx, this);
  SSL_CTX_set_alpn_select_cb(ctx, on_alpn, this);
  SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, on_ticket);
  if (!site->tls.ocsp_response.empty()) {
    SSL_CTX_set_tlsext_status_cb(ctx, on_status);
    SSL_CTX_set_tlsext_status_arg(ctx, const_cast<config::Site*>(site));
  }
  return ctx;
}

int ServerContexts::check_client(const Stream& stream, size_t site, std::string_view* why) const {
  const config::SiteTls& tls = config_->sites[site].tls;
  if (tls.verify_client == config::SiteTls::VerifyClient::kOff) return 0;
  const bool same_context =
      site < site_context_.size() && site_context_[site] >= 0 &&
      SSL_get_SSL_CTX(stream.ssl()) == contexts_[static_cast<size_t>(site_context_[site])];
  const bool presented = SSL_get0_peer_certificate(stream.ssl()) != nullptr;
  const int status = client_certificate_status(tls.verify_client, same_context, presented,
                                               stream.client_verified());
  if (status == 421) {
    *why = "the TLS handshake was for another site (SNI); this one verifies client certificates";
  } else if (status == 400) {
    *why = presented ? stream.client_verify() : "no required client certificate was sent";
  }
  return status;
}

std::unique_ptr<Stream> ServerContexts::accept(int fd, bool offer_h2) const {
  std::unique_ptr<Stream> stream =
      Stream::make(contexts_[default_context_], fd, Stream::Role::kServer);
  if (stream && offer_h2) SSL_set_app_data(stream->ssl(), &offer_h2_marker);
  return stream;
}

void ServerContexts::use_context(SSL* ssl, std::string_view server_name) const {
  if (server_name.empty()) return;  // no SNI: the default certificate
  size_t index = pick_context(*config_, site_context_, default_context_, server_name);
  SSL_CTX* wanted = contexts_[index];
  if (SSL_get_SSL_CTX(ssl) == wanted) return;
  SSL_set_SSL_CTX(ssl, wanted);  // the certificates, the trusted CAs and the session id context
  // The SSL copied its verify settings from the context it was made with: take the new one's.
  SSL_set_verify(ssl, SSL_CTX_get_verify_mode(wanted), SSL_CTX_get_verify_callback(wanted));
  SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(wanted));
}

// The site's context is chosen here, before OpenSSL looks for a session to resume (TLS 1.2's
// session ID or ticket, TLS 1.3's PSK), so that lookup compares the chosen site's session id
// context: a session verified for one site never resumes into another's.
int ServerContexts::on_client_hello(SSL* ssl, int* /*alert*/, void* arg) {
  const unsigned char* extension = nullptr;
  size_t length = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &extension, &length) == 1)
    static_cast<const ServerContexts*>(arg)->use_context(ssl, server_name_of({extension, length}));
  return SSL_CLIENT_HELLO_SUCCESS;
}

int ServerContexts::on_server_name(SSL* ssl, int* /*alert*/, void* arg) {
  // Normally the client-hello callback chose already; this acknowledges the name.
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name) static_cast<const ServerContexts*>(arg)->use_context(ssl, name);
  return SSL_TLSEXT_ERR_OK;
}

int ServerContexts::on_alpn(SSL* ssl, const unsigned char** out, unsigned char* out_length,
                            const unsigned char* in, unsigned int in_length, void* /*arg*/) {
  const bool offer_h2 = SSL_get_app_data(ssl) == &offer_h2_marker;
  std::string_view chosen = select_alpn({in, in_length}, offer_h2);
  if (chosen.empty()) return SSL_TLSEXT_ERR_NOACK;
  // Point into the client's list: it outlives the callback, a string_view of ours may not.
  for (unsigned int i = 0; i < in_length; i += 1u + in[i]) {
    if (std::string_view(reinterpret_cast<const char*>(in + i + 1), in[i]) == chosen) {
      *out = in + i + 1;
      *out_length = in[i];
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_NOACK;
}

std::span<const TicketKey> ServerContexts::ticket_keys(int64_t now_seconds) {
  if (keys_from_files_) return keys_;
  const int64_t rotation = std::max<int64_t>(60, config_->tls.ticket_rotation.count() / 1000);
  const int64_t period = now_seconds / rotation;
  if (period != keys_period_) {
    keys_ = {derive_key(period), derive_key(period - 1)};
    keys_period_ = period;
  }
  return keys_;
}

int ServerContexts::on_ticket(SSL* ssl, unsigned char* name, unsigned char* iv,
                              EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
  auto* self = static_cast<ServerContexts*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  if (!self) return -1;
  std::span<const TicketKey> keys = self->ticket_keys(static_cast<int64_t>(std::time(nullptr)));
  if (keys.empty()) return -1;
  size_t index = 0;
  if (encrypt) {
    std::memcpy(name, keys[0].name, 16);
    if (RAND_bytes(iv, 16) != 1) return -1;
  } else {
    while (index < keys.size() && std::memcmp(name, keys[index].name, 16) != 0) ++index;
    if (index == keys.size()) return 0;  // an unknown (expired) key: a full handshake
  }
  const TicketKey& key = keys[index];
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(key.hmac),
                                        sizeof key.hmac),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(mac, params) != 1) return -1;
  const int ok = encrypt ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes, iv)
                         : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes, iv);
  if (ok != 1) return -1;
  if (encrypt) return 1;
  // 2 asks OpenSSL for a fresh ticket after the handshake. A ticket sealed with an older key
  // still resumes and gets one. So does every TLS 1.3 resumption: clients use a 1.3 ticket once
  // (RFC 8446 C.4), and OpenSSL sends none after a resumption unless asked, so the client's
  // next connection was a full handshake; in the tls_resume benchmark half of them were.
  return index == 0 && SSL_version(ssl) != TLS1_3_VERSION ? 1 : 2;
}

int ServerContexts::on_status(SSL* ssl, void* arg) {
  const auto* site = static_cast<const config::Site*>(arg);
  const std::string& der = site->tls.ocsp_response;
  if (der.empty()) return SSL_TLSEXT_ERR_NOACK;
  auto* copy = static_cast<unsigned char*>(OPENSSL_malloc(der.size()));  // OpenSSL frees it
  if (!copy) return SSL_TLSEXT_ERR_NOACK;
  std::memcpy(copy, der.data(), der.size());
  SSL_set_tlsext_status_ocsp_resp(ssl, copy, static_cast<long>(der.size()));
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace peregrine::tls
