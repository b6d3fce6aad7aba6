// The cryptography of an ACME client (RFC 8555 §6.2, RFC 7515, RFC 7638, RFC 8737) on OpenSSL 3:
// account keys, their JWK and thumbprint, JWS signing, External Account Binding, key
// authorizations and the TLS-ALPN-01 certificate. Pure: no I/O beyond reading PEM from memory.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace peregrine::acme {

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

// RFC 7515 §2: base64url without padding. decode refuses padding, whitespace and other bytes.
std::string base64url_encode(std::string_view bytes);
// `what`, then ": " and OpenSSL's first queued error if there is one (the queue is cleared).
std::string openssl_error(std::string_view what);
std::optional<std::string> base64url_decode(std::string_view text);
std::string sha256(std::string_view bytes);

enum class KeyType { kEcdsaP256, kRsa2048 };
std::string_view key_type_name(KeyType type);  // "ecdsa-p256", "rsa2048"
std::optional<KeyType> parse_key_type(std::string_view name);

PkeyPtr generate_key(KeyType type);
// PKCS#8 PEM, unencrypted (stored with mode 0600).
std::string private_key_pem(EVP_PKEY* key);
// nullopt with *error set for damaged PEM or a key that is neither P-256 nor RSA (>= 2048 bits).
PkeyPtr parse_private_key_pem(std::string_view pem, std::string* error);

// An account key: what signs every request (ES256 for P-256, RS256 for RSA).
class AccountKey {
 public:
  explicit AccountKey(PkeyPtr key);
  static std::optional<AccountKey> from_pem(std::string_view pem, std::string* error);

  EVP_PKEY* key() const { return key_.get(); }
  std::string_view alg() const { return rsa_ ? "RS256" : "ES256"; }
  // The public JWK with its members in lexicographic order and no whitespace: RFC 7638's form,
  // also used as it is in the protected header.
  const std::string& jwk_json() const { return jwk_; }
  // RFC 7638: base64url(SHA-256(jwk_json())).
  const std::string& thumbprint() const { return thumbprint_; }
  // The JWS signature of "protected.payload" (both already base64url): R||S for ES256 (RFC 7518
  // §3.4, 64 bytes), PKCS#1 v1.5 for RS256. Empty on failure (never expected).
  std::string sign(std::string_view signing_input) const;

 private:
  PkeyPtr key_;
  bool rsa_ = false;
  std::string jwk_;
  std::string thumbprint_;
};

// A JWS in the flattened JSON serialization (RFC 8555 §6.2), as the body of a POST.
// `kid` empty: the header carries `jwk` (newAccount, revocation by certificate key).
// `payload` empty: POST-as-GET (RFC 8555 §6.3), an empty payload, not "{}".
std::string sign_request(const AccountKey& key, std::string_view kid, std::string_view nonce,
                         std::string_view url, std::string_view payload);

// RFC 8555 §7.3.4: the externalAccountBinding member of a newAccount payload, a JWS (HS256)
// over the account's JWK under the CA's MAC key (hmac_key_b64url as the CA gives it).
// nullopt with *error set when the MAC key is not base64url.
std::optional<std::string> external_account_binding(const AccountKey& key, std::string_view eab_kid,
                                                    std::string_view hmac_key_b64url,
                                                    std::string_view new_account_url,
                                                    std::string* error);

// RFC 8555 §8.1: token "." thumbprint, what an HTTP-01 response body is.
std::string key_authorization(std::string_view token, const AccountKey& key);
// RFC 8555 §8.4 (DNS-01) and RFC 8737 §3 (TLS-ALPN-01) carry SHA-256 of it.
std::string key_authorization_digest(std::string_view key_authorization);

// RFC 8737: the self-signed certificate a TLS-ALPN-01 validation gets for `name` when it offers
// ALPN "acme-tls/1": subjectAltName = name alone, and the critical acmeIdentifier extension
// (1.3.6.1.5.5.7.1.31) holding the SHA-256 of the key authorization as an OCTET STRING.
struct AlpnCertificate {
  X509Ptr certificate;
  PkeyPtr key;
  std::string certificate_pem;
  std::string key_pem;
};
std::optional<AlpnCertificate> make_tls_alpn_certificate(std::string_view name,
                                                         std::string_view key_authorization,
                                                         std::string* error);
// ALPN "acme-tls/1" as it goes in a ClientHello/ServerHello protocol list.
inline constexpr std::string_view kAcmeTlsAlpn = "acme-tls/1";

// The public key a JWK names (EC P-256 or RSA), for checking signatures: tests and the
// verification of what a CA sends back. nullopt-like null with *error set otherwise.
PkeyPtr public_key_from_jwk(std::string_view jwk_json, std::string* error);
// Checks a flattened JWS's signature (ES256 or RS256) against a key; tests use it to prove
// what sign_request produces verifies with OpenSSL.
bool verify_jws(std::string_view jws_json, EVP_PKEY* key, std::string* error);

}  // namespace peregrine::acme
