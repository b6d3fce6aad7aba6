// A small synchronous HTTP/1.1 client (plain or TLS with a private CA bundle) and the two
// challenge responders, for acme-order only: the tool and the integration tests drive the pure
// order machine (src/acme/order.h) with them. The server will drive the same machine on its
// worker loop through src/client/ instead (docs/acme.md).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "acme/crypto.h"
#include "acme/order.h"

namespace peregrine::acme_tool {

// One request on a fresh connection (Connection: close). false with *error on any failure.
bool fetch(const acme::Request& request, const std::string& ca_file, int timeout_seconds,
           acme::Response* response, std::string* error);

// Answers GET /.well-known/acme-challenge/<token> with its key authorization; 404 otherwise.
class Http01Responder {
 public:
  bool start(const std::string& address, int port, std::string* error);
  void stop();
  void set(const std::string& token, const std::string& key_authorization);
  ~Http01Responder() { stop(); }

 private:
  void run();
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, std::string> answers_;
};

// Answers a TLS handshake offering ALPN "acme-tls/1" with the RFC 8737 certificate of the SNI
// name; refuses any other.
class TlsAlpn01Responder {
 public:
  bool start(const std::string& address, int port, std::string* error);
  void stop();
  bool set(const std::string& name, const std::string& key_authorization, std::string* error);
  ~TlsAlpn01Responder() { stop(); }

 private:
  void run();
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, acme::AlpnCertificate> certificates_;
  void* ctx_ = nullptr;  // SSL_CTX
  friend struct AlpnCallbacks;
};

}  // namespace peregrine::acme_tool
