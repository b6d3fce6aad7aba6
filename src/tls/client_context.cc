#include "tls/client_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace peregrine::tls {

namespace {

std::string take_errors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof line);
    if (!text.empty()) text.append("; ");
    text.append(line);
  }
  return text.empty() ? std::string("unknown OpenSSL error") : text;
}

// The SessionCache a session's new tickets go to.
int session_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int on_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* cache = static_cast<SessionCache*>(SSL_get_ex_data(ssl, session_index()));
  if (cache == nullptr || !SSL_SESSION_is_resumable(session)) return 0;
  cache->keep(session);
  return 1;  // the reference is ours now
}

bool is_ip_literal(const std::string& name) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, name.c_str(), buffer) == 1;
}

// "cannot read FILE: reason" when the file is not there or not readable for us, else "".
std::string unreadable(const char* what, const std::string& path) {
  if (::access(path.c_str(), R_OK) == 0) return "";
  return std::string("cannot read the ") + what + " '" + path + "': " + std::strerror(errno);
}

}  // namespace

void SessionCache::keep(SSL_SESSION* session) {
  clear();
  session_ = session;
}

void SessionCache::clear() {
  if (session_ != nullptr) SSL_SESSION_free(session_);
  session_ = nullptr;
}

std::unique_ptr<ClientContext> ClientContext::make(const ClientOptions& options,
                                                   std::string* error) {
  ERR_clear_error();
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  if (context == nullptr) {
    *error = "cannot create a TLS client context: " + take_errors();
    return nullptr;
  }
  std::unique_ptr<ClientContext> result(new ClientContext(context, options.verify));
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  // The exchange's write loop retries from a buffer that may have grown (and moved) since the
  // write that would have blocked, and takes what was written record by record, as with send().
  SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read whole socket buffers rather than a record header, then its body: one recv() per
  // response instead of two or more (the exchange reads until EAGAIN in any case).
  SSL_CTX_set_read_ahead(context, 1);
  static constexpr unsigned char kAlpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(context, kAlpn, sizeof kAlpn - 1);
  SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(context, on_new_session);

  if (options.verify) {
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    if (options.ca_file.empty()) {
      if (SSL_CTX_set_default_verify_paths(context) != 1) {
        *error = "cannot load the system's CA certificates: " + take_errors();
        return nullptr;
      }
    } else {
      if (std::string problem = unreadable("CA file", options.ca_file); !problem.empty()) {
        *error = problem;
        return nullptr;
      }
      if (SSL_CTX_load_verify_file(context, options.ca_file.c_str()) != 1) {
        *error = "the CA file '" + options.ca_file +
                 "' holds no usable PEM certificate: " + take_errors();
        return nullptr;
      }
    }
  } else {
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nullptr);
  }

  if (!options.certificate.empty()) {
    for (auto [what, path] : {std::pair{"client certificate", &options.certificate},
                              std::pair{"client key", &options.key}}) {
      if (std::string problem = unreadable(what, *path); !problem.empty()) {
        *error = problem;
        return nullptr;
      }
    }
    if (SSL_CTX_use_certificate_chain_file(context, options.certificate.c_str()) != 1) {
      *error = "the client certificate '" + options.certificate +
               "' holds no usable PEM certificate: " + take_errors();
      return nullptr;
    }
    const bool loaded =
        SSL_CTX_use_PrivateKey_file(context, options.key.c_str(), SSL_FILETYPE_PEM) == 1;
    if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      *error = "the client key '" + options.key + "' holds no usable PEM key: " + take_errors();
      return nullptr;
    }
    if (!loaded || SSL_CTX_check_private_key(context) != 1) {
      ERR_clear_error();
      *error = "the client key '" + options.key + "' does not match the certificate '" +
               options.certificate + "'";
      return nullptr;
    }
  }
  return result;
}

ClientContext::~ClientContext() {
  SSL_CTX_free(context_);
}

std::unique_ptr<Stream> ClientContext::open(int fd, const std::string& name,
                                            SessionCache* cache) const {
  std::unique_ptr<Stream> stream = Stream::make(context_, fd, Stream::Role::kClient);
  if (!stream) return nullptr;
  SSL* ssl = stream->ssl();
  bool ok = true;
  if (!name.empty()) {
    if (is_ip_literal(name)) {
      // RFC 6066: SNI carries names only. The address is checked in the certificate's IP SANs.
      if (verify_) ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
    } else {
      ok = SSL_set_tlsext_host_name(ssl, name.c_str()) == 1;
      if (ok && verify_) {
        SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        ok = SSL_set1_host(ssl, name.c_str()) == 1;
      }
    }
  }
  if (cache != nullptr) {
    SSL_set_ex_data(ssl, session_index(), cache);
    if (cache->get() != nullptr) SSL_set_session(ssl, cache->get());
  }
  if (!ok) {
    ERR_clear_error();
    return nullptr;
  }
  return stream;
}

std::string ClientContext::failure_reason(const Stream& stream) {
  std::string reason = stream.error();
  SSL* ssl = stream.ssl();
  long result = SSL_get_verify_result(ssl);
  if (SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE && result != X509_V_OK) {
    reason += " (";
    reason += X509_verify_cert_error_string(result);
    reason += ")";
  }
  return reason.empty() ? std::string("handshake failed") : reason;
}

}  // namespace peregrine::tls
