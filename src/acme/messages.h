// ACME (RFC 8555) messages: the payloads a client sends and the parsing of what a CA answers
// (directory, account, order, authorization, challenge, problem documents), the CSR, the
// certificate chain, Retry-After, and RFC 9773 renewal information. Pure: text in, a value or
// an error out; never an exception (the JSON library's are caught inside).
#pragma once

#include <openssl/x509.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acme/crypto.h"

namespace peregrine::acme {

// The directory's URLs (RFC 8555 §7.1.1). renewal_info is RFC 9773's, empty when the CA has none.
struct Directory {
  std::string new_nonce;
  std::string new_account;
  std::string new_order;
  std::string revoke_cert;
  std::string key_change;
  std::string renewal_info;
  std::string terms_of_service;
  bool external_account_required = false;
};
std::optional<Directory> parse_directory(std::string_view body, std::string* error);

// RFC 8555 §6.7 / RFC 7807. `type` in full ("urn:ietf:params:acme:error:badNonce").
struct Problem {
  std::string type;
  std::string detail;
  int status = 0;
  std::vector<Problem> subproblems;  // with their identifier folded into detail
  // "badNonce" for an ACME error type, else the type as it is.
  std::string_view short_type() const;
  bool is(std::string_view acme_error) const { return short_type() == acme_error; }
  // "rateLimited: too many certificates (HTTP 429)" plus the subproblems.
  std::string describe() const;
};
// nullopt when the body is not a problem document (with or without the problem+json type).
std::optional<Problem> parse_problem(std::string_view body);

enum class Status : uint8_t {
  kUnknown,
  kPending,
  kReady,
  kProcessing,
  kValid,
  kInvalid,
  kRevoked,
  kDeactivated,
  kExpired,
};
Status parse_status(std::string_view text);
std::string_view status_name(Status status);

struct Identifier {
  std::string type;  // "dns" or "ip" (RFC 8738)
  std::string value;
};
// An IP address literal becomes an "ip" identifier, anything else "dns".
Identifier identifier_for(std::string_view name);

struct Challenge {
  std::string type;  // "http-01", "tls-alpn-01", "dns-01"...
  std::string url;
  std::string token;
  Status status = Status::kUnknown;
  std::optional<Problem> error;
};
struct Authorization {
  Identifier identifier;
  Status status = Status::kUnknown;
  std::vector<Challenge> challenges;
  bool wildcard = false;
};
std::optional<Authorization> parse_authorization(std::string_view body, std::string* error);
std::optional<Challenge> parse_challenge(std::string_view body, std::string* error);

struct Order {
  Status status = Status::kUnknown;
  std::vector<Identifier> identifiers;
  std::vector<std::string> authorizations;
  std::string finalize;
  std::string certificate;  // once valid
  std::optional<Problem> error;
};
std::optional<Order> parse_order(std::string_view body, std::string* error);

struct Account {
  Status status = Status::kUnknown;
};
std::optional<Account> parse_account(std::string_view body, std::string* error);

// Payloads (JSON text, to be signed with sign_request).
// eab_jws: external_account_binding()'s result, or empty.
std::string new_account_payload(const std::vector<std::string>& contacts, bool terms_agreed,
                                std::string_view eab_jws);
std::string new_order_payload(const std::vector<std::string>& names);
std::string finalize_payload(std::string_view csr_der);
std::string challenge_response_payload();  // "{}": the client is ready (RFC 8555 §7.5.1)

// A CSR (DER) for `names` (the first is also the subject's CN), signed with the certificate's
// key: SHA-256 with ECDSA or RSA.
std::optional<std::string> make_csr_der(const std::vector<std::string>& names, EVP_PKEY* key,
                                        std::string* error);

// The PEM chain a CA returns (application/pem-certificate-chain): every certificate parsed, at
// least one, and nothing else but whitespace between them.
std::optional<std::vector<X509Ptr>> parse_pem_chain(std::string_view pem, std::string* error);
// notAfter of a certificate as Unix time.
std::optional<time_t> certificate_not_after(X509* cert);
std::optional<time_t> certificate_not_before(X509* cert);

// Retry-After (RFC 9110 §10.2.3): delta-seconds or an HTTP-date, relative to `now`; a date in
// the past is 0 s. nullopt for anything else.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value, time_t now);

// RFC 3339 date-time ("2025-01-02T03:04:05Z", fractions and offsets accepted) as Unix time.
std::optional<time_t> parse_rfc3339(std::string_view text);

// RFC 9773 §4.1: base64url(authorityKeyIdentifier's keyIdentifier) "." base64url(serial's DER
// content octets). nullopt with *error when the certificate has no AKI key identifier.
std::optional<std::string> ari_certificate_id(X509* cert, std::string* error);

// RFC 9773 §4.2: the renewalInfo response.
struct RenewalInfo {
  time_t window_start = 0;
  time_t window_end = 0;
  std::string explanation_url;
};
std::optional<RenewalInfo> parse_renewal_info(std::string_view body, std::string* error);
// A moment chosen uniformly in the window (RFC 9773 §4.2's advice), from a random number.
time_t pick_in_window(const RenewalInfo& info, uint64_t random);

// When a certificate without renewal information is renewed: two thirds into its lifetime,
// brought forward by up to a twentieth of the lifetime at random (4.5 of 90 days, 8 h of 7 days),
// so a fleet's certificates issued together do not all renew in the same second.
time_t renewal_time(time_t not_before, time_t not_after, uint64_t random);

}  // namespace peregrine::acme
