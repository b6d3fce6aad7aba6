// A throw-away PKI for the TLS client tests: a CA and a server certificate it signed for
// "localhost" and 127.0.0.1 (P-256, in memory), written as PEM files on request.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string>

namespace peregrine::tls::test {

class TestPki {
 public:
  explicit TestPki(const char* ca_name = "Peregrine test CA") {
    ca_key_ = EVP_EC_gen("P-256");
    ca_ = make(ca_name, nullptr, ca_key_, ca_key_, "critical,CA:TRUE", nullptr);
    server_key_ = EVP_EC_gen("P-256");
    server_ =
        make("localhost", ca_, ca_key_, server_key_, "CA:FALSE", "DNS:localhost,IP:127.0.0.1");
  }
  ~TestPki() {
    X509_free(ca_);
    X509_free(server_);
    EVP_PKEY_free(ca_key_);
    EVP_PKEY_free(server_key_);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  // A server context presenting the server certificate.
  SSL_CTX* server_context() const {
    SSL_CTX* context = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(context, server_);
    SSL_CTX_use_PrivateKey(context, server_key_);
    return context;
  }

  bool write_ca(const std::string& path) const { return write_cert(path, ca_); }
  bool write_server_cert(const std::string& path) const { return write_cert(path, server_); }
  bool write_server_key(const std::string& path) const {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return false;
    bool ok = PEM_write_PrivateKey(f, server_key_, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    std::fclose(f);
    return ok;
  }

 private:
  static bool write_cert(const std::string& path, X509* cert) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return false;
    bool ok = PEM_write_X509(f, cert) == 1;
    std::fclose(f);
    return ok;
  }

  static void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
    X509V3_CTX context;
    X509V3_set_ctx(&context, issuer ? issuer : cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
    X509_add_ext(cert, extension, -1);
    X509_EXTENSION_free(extension);
  }

  static X509* make(const char* common_name, X509* issuer, EVP_PKEY* issuer_key, EVP_PKEY* key,
                    const char* constraints, const char* alt_names) {
    static long serial = 1;
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), ++serial);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
    X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
    add_extension(cert, issuer, NID_basic_constraints, constraints);
    if (alt_names) add_extension(cert, issuer, NID_subject_alt_name, alt_names);
    X509_sign(cert, issuer_key, EVP_sha256());
    return cert;
  }

  EVP_PKEY* ca_key_ = nullptr;
  X509* ca_ = nullptr;
  EVP_PKEY* server_key_ = nullptr;
  X509* server_ = nullptr;
};

}  // namespace peregrine::tls::test
