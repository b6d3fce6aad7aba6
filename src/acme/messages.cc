#include "acme/messages.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <nlohmann/json.hpp>

#include "acme/crypto.h"
#include "http/http_date.h"

namespace peregrine::acme {
namespace {

using json = nlohmann::json;

constexpr std::string_view kAcmeErrorPrefix = "urn:ietf:params:acme:error:";

// The JSON library throws on a type mismatch; these read a member or give a default.
std::string string_member(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

std::optional<json> parse_object(std::string_view body, std::string_view what, std::string* error) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    *error = std::string(what) + " is not a JSON object";
    return std::nullopt;
  }
  return doc;
}

std::optional<Problem> problem_from(const json& doc) {
  if (!doc.is_object()) return std::nullopt;
  auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) return std::nullopt;
  Problem problem;
  problem.type = type->get<std::string>();
  problem.detail = string_member(doc, "detail");
  auto status = doc.find("status");
  if (status != doc.end() && status->is_number_integer()) problem.status = status->get<int>();
  auto subs = doc.find("subproblems");
  if (subs != doc.end() && subs->is_array()) {
    for (const json& sub : *subs) {
      std::optional<Problem> inner = problem_from(sub);
      if (!inner) continue;
      auto ident = sub.find("identifier");
      if (ident != sub.end() && ident->is_object())
        inner->detail = string_member(*ident, "value") + ": " + inner->detail;
      problem.subproblems.push_back(std::move(*inner));
    }
  }
  return problem;
}

bool is_ip_literal(std::string_view name) {
  std::string text(name);
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

std::optional<time_t> asn1_time(const ASN1_TIME* time) {
  struct tm tm {};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return std::nullopt;
  return timegm(&tm);
}

}  // namespace

std::optional<Directory> parse_directory(std::string_view body, std::string* error) {
  auto doc = parse_object(body, "the directory", error);
  if (!doc) return std::nullopt;
  Directory dir;
  dir.new_nonce = string_member(*doc, "newNonce");
  dir.new_account = string_member(*doc, "newAccount");
  dir.new_order = string_member(*doc, "newOrder");
  dir.revoke_cert = string_member(*doc, "revokeCert");
  dir.key_change = string_member(*doc, "keyChange");
  dir.renewal_info = string_member(*doc, "renewalInfo");
  auto meta = doc->find("meta");
  if (meta != doc->end() && meta->is_object()) {
    dir.terms_of_service = string_member(*meta, "termsOfService");
    auto eab = meta->find("externalAccountRequired");
    dir.external_account_required = eab != meta->end() && eab->is_boolean() && eab->get<bool>();
  }
  for (auto [name, value] : {std::pair{"newNonce", &dir.new_nonce},
                             {"newAccount", &dir.new_account},
                             {"newOrder", &dir.new_order}}) {
    if (value->empty()) {
      *error = std::string("the directory has no ") + name + " URL";
      return std::nullopt;
    }
  }
  return dir;
}

std::string_view Problem::short_type() const {
  std::string_view t = type;
  if (t.substr(0, kAcmeErrorPrefix.size()) == kAcmeErrorPrefix)
    t.remove_prefix(kAcmeErrorPrefix.size());
  return t;
}

std::string Problem::describe() const {
  std::string out(short_type());
  if (!detail.empty()) out += ": " + detail;
  if (status != 0) out += " (HTTP " + std::to_string(status) + ")";
  for (const Problem& sub : subproblems)
    out += "; " + std::string(sub.short_type()) + ": " + sub.detail;
  return out;
}

std::optional<Problem> parse_problem(std::string_view body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return std::nullopt;
  return problem_from(doc);
}

Status parse_status(std::string_view text) {
  static constexpr std::pair<std::string_view, Status> kNames[] = {
      {"pending", Status::kPending},         {"ready", Status::kReady},
      {"processing", Status::kProcessing},   {"valid", Status::kValid},
      {"invalid", Status::kInvalid},         {"revoked", Status::kRevoked},
      {"deactivated", Status::kDeactivated}, {"expired", Status::kExpired}};
  for (auto [name, status] : kNames)
    if (name == text) return status;
  return Status::kUnknown;
}

std::string_view status_name(Status status) {
  switch (status) {
    case Status::kPending:
      return "pending";
    case Status::kReady:
      return "ready";
    case Status::kProcessing:
      return "processing";
    case Status::kValid:
      return "valid";
    case Status::kInvalid:
      return "invalid";
    case Status::kRevoked:
      return "revoked";
    case Status::kDeactivated:
      return "deactivated";
    case Status::kExpired:
      return "expired";
    case Status::kUnknown:
      break;
  }
  return "unknown";
}

Identifier identifier_for(std::string_view name) {
  return Identifier{is_ip_literal(name) ? "ip" : "dns", std::string(name)};
}

namespace {

Challenge challenge_from(const json& doc) {
  Challenge ch;
  ch.type = string_member(doc, "type");
  ch.url = string_member(doc, "url");
  ch.token = string_member(doc, "token");
  ch.status = parse_status(string_member(doc, "status"));
  auto err = doc.find("error");
  if (err != doc.end()) ch.error = problem_from(*err);
  return ch;
}

// RFC 8555 §8.1: a token is base64url, and at least 128 bits of entropy.
bool valid_token(std::string_view token) {
  return token.size() >= 22 &&
         token.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
             std::string_view::npos;
}

}  // namespace

std::optional<Challenge> parse_challenge(std::string_view body, std::string* error) {
  auto doc = parse_object(body, "the challenge", error);
  if (!doc) return std::nullopt;
  Challenge ch = challenge_from(*doc);
  if (ch.type.empty() || ch.url.empty() || ch.status == Status::kUnknown) {
    *error = "the challenge has no type, url or known status";
    return std::nullopt;
  }
  return ch;
}

std::optional<Authorization> parse_authorization(std::string_view body, std::string* error) {
  auto doc = parse_object(body, "the authorization", error);
  if (!doc) return std::nullopt;
  Authorization authz;
  authz.status = parse_status(string_member(*doc, "status"));
  auto ident = doc->find("identifier");
  if (ident != doc->end() && ident->is_object())
    authz.identifier = {string_member(*ident, "type"), string_member(*ident, "value")};
  auto wildcard = doc->find("wildcard");
  authz.wildcard = wildcard != doc->end() && wildcard->is_boolean() && wildcard->get<bool>();
  auto challenges = doc->find("challenges");
  if (challenges != doc->end() && challenges->is_array()) {
    for (const json& c : *challenges) {
      if (!c.is_object()) continue;
      Challenge ch = challenge_from(c);
      // A challenge we would answer with a token that could break out of a URL path or a file
      // name is the CA's error, not ours to pass on.
      if ((ch.type == "http-01" || ch.type == "tls-alpn-01" || ch.type == "dns-01") &&
          !valid_token(ch.token))
        continue;
      if (ch.url.empty()) continue;
      authz.challenges.push_back(std::move(ch));
    }
  }
  if (authz.status == Status::kUnknown || authz.identifier.value.empty()) {
    *error = "the authorization has no known status or identifier";
    return std::nullopt;
  }
  return authz;
}

std::optional<Order> parse_order(std::string_view body, std::string* error) {
  auto doc = parse_object(body, "the order", error);
  if (!doc) return std::nullopt;
  Order order;
  order.status = parse_status(string_member(*doc, "status"));
  order.finalize = string_member(*doc, "finalize");
  order.certificate = string_member(*doc, "certificate");
  auto idents = doc->find("identifiers");
  if (idents != doc->end() && idents->is_array())
    for (const json& i : *idents)
      if (i.is_object())
        order.identifiers.push_back({string_member(i, "type"), string_member(i, "value")});
  auto authzs = doc->find("authorizations");
  if (authzs != doc->end() && authzs->is_array())
    for (const json& a : *authzs)
      if (a.is_string()) order.authorizations.push_back(a.get<std::string>());
  auto err = doc->find("error");
  if (err != doc->end()) order.error = problem_from(*err);
  if (order.status == Status::kUnknown) {
    *error = "the order has no known status";
    return std::nullopt;
  }
  if (order.finalize.empty()) {
    *error = "the order has no finalize URL";
    return std::nullopt;
  }
  return order;
}

std::optional<Account> parse_account(std::string_view body, std::string* error) {
  auto doc = parse_object(body, "the account", error);
  if (!doc) return std::nullopt;
  Account account;
  account.status = parse_status(string_member(*doc, "status"));
  return account;
}

std::string new_account_payload(const std::vector<std::string>& contacts, bool terms_agreed,
                                std::string_view eab_jws) {
  json payload = json::object();
  if (terms_agreed) payload["termsOfServiceAgreed"] = true;
  if (!contacts.empty()) {
    json list = json::array();
    for (const std::string& c : contacts)
      list.push_back(c.find(':') == std::string::npos ? "mailto:" + c : c);
    payload["contact"] = list;
  }
  if (!eab_jws.empty()) payload["externalAccountBinding"] = json::parse(eab_jws, nullptr, false);
  return payload.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string new_order_payload(const std::vector<std::string>& names) {
  json list = json::array();
  for (const std::string& name : names) {
    Identifier id = identifier_for(name);
    list.push_back({{"type", id.type}, {"value", id.value}});
  }
  return json{{"identifiers", list}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string finalize_payload(std::string_view csr_der) {
  return json{{"csr", base64url_encode(csr_der)}}.dump(-1, ' ', false,
                                                       json::error_handler_t::replace);
}

std::string challenge_response_payload() {
  return "{}";
}

std::optional<std::string> make_csr_der(const std::vector<std::string>& names, EVP_PKEY* key,
                                        std::string* error) {
  if (names.empty()) {
    *error = "a CSR needs at least one name";
    return std::nullopt;
  }
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> req(X509_REQ_new(), X509_REQ_free);
  X509_REQ_set_version(req.get(), 0);
  // A CN is limited to 64 bytes; longer names live in the SAN only.
  if (names[0].size() <= 64) {
    X509_NAME* subject = X509_REQ_get_subject_name(req.get());
    X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(names[0].c_str()), -1, -1, 0);
  }
  std::string san;
  for (const std::string& name : names) {
    // The list is comma-separated: a name with one would turn into two.
    if (name.empty() || name.find_first_of(", \t\r\n") != std::string::npos) {
      *error = "'" + name + "' is not a host name";
      return std::nullopt;
    }
    if (!san.empty()) san += ',';
    san += (is_ip_literal(name) ? "IP:" : "DNS:") + name;
  }
  STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, san.c_str());
  if (ext == nullptr) {
    sk_X509_EXTENSION_free(exts);
    *error = openssl_error("cannot make the subjectAltName");
    return std::nullopt;
  }
  sk_X509_EXTENSION_push(exts, ext);
  X509_REQ_add_extensions(req.get(), exts);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  if (X509_REQ_set_pubkey(req.get(), key) != 1 ||
      X509_REQ_sign(req.get(), key, EVP_sha256()) <= 0) {
    *error = openssl_error("cannot sign the CSR");
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  int len = i2d_X509_REQ(req.get(), &der);
  if (len <= 0) {
    *error = openssl_error("cannot encode the CSR");
    return std::nullopt;
  }
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

std::optional<std::vector<X509Ptr>> parse_pem_chain(std::string_view pem, std::string* error) {
  std::vector<X509Ptr> chain;
  std::string_view rest = pem;
  constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  while (true) {
    size_t skip = rest.find_first_not_of(" \t\r\n");
    if (skip == std::string_view::npos) break;
    rest.remove_prefix(skip);
    if (rest.substr(0, kBegin.size()) != kBegin) {
      *error = "certificate " + std::to_string(chain.size() + 1) +
               " of the chain does not start with " + std::string(kBegin);
      return std::nullopt;
    }
    size_t end = rest.find(kEnd);
    if (end == std::string_view::npos) {
      *error = "certificate " + std::to_string(chain.size() + 1) + " of the chain is cut short";
      return std::nullopt;
    }
    std::string_view block = rest.substr(0, end + kEnd.size());
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(
        BIO_new_mem_buf(block.data(), static_cast<int>(block.size())), BIO_free);
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) {
      *error = openssl_error("certificate " + std::to_string(chain.size() + 1) +
                             " of the chain is damaged");
      return std::nullopt;
    }
    chain.push_back(std::move(cert));
    rest.remove_prefix(block.size());
  }
  if (chain.empty()) {
    *error = "the chain holds no certificate";
    return std::nullopt;
  }
  return chain;
}

std::optional<time_t> certificate_not_after(X509* cert) {
  return asn1_time(X509_get0_notAfter(cert));
}
std::optional<time_t> certificate_not_before(X509* cert) {
  return asn1_time(X509_get0_notBefore(cert));
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value, time_t now) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos) {
    if (value.size() > 9) return std::chrono::seconds(999'999'999);  // absurd, but a number
    return std::chrono::seconds(std::stol(std::string(value)));
  }
  std::optional<time_t> when = http::parse_http_date(value, now);
  if (!when) return std::nullopt;
  return std::chrono::seconds(*when > now ? *when - now : 0);
}

std::optional<time_t> parse_rfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm|-hh:mm), 't' and 'z' allowed as RFC 3339 §5.6 says.
  auto digits = [&](size_t at, size_t n, int* out) {
    if (at + n > s.size()) return false;
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
  };
  struct tm tm {};
  int year, month, day, hour, minute, second;
  if (!digits(0, 4, &year) || s.size() < 19 || s[4] != '-' || !digits(5, 2, &month) ||
      s[7] != '-' || !digits(8, 2, &day) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !digits(11, 2, &hour) || s[13] != ':' || !digits(14, 2, &minute) || s[16] != ':' ||
      !digits(17, 2, &second))
    return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  size_t at = 19;
  if (at < s.size() && s[at] == '.') {
    ++at;
    size_t start = at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
    if (at == start) return std::nullopt;
  }
  long offset = 0;
  if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    int oh, om;
    if (!digits(at + 1, 2, &oh) || at + 3 >= s.size() || s[at + 3] != ':' ||
        !digits(at + 4, 2, &om) || oh > 23 || om > 59)
      return std::nullopt;
    offset = (s[at] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != s.size()) return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  time_t t = timegm(&tm);
  return t - offset;
}

std::optional<std::string> ari_certificate_id(X509* cert, std::string* error) {
  // Decoded here rather than through X509_get0_authority_key_id, whose cache refuses a
  // certificate OpenSSL finds otherwise incomplete.
  auto* akid = static_cast<AUTHORITY_KEYID*>(
      X509_get_ext_d2i(cert, NID_authority_key_identifier, nullptr, nullptr));
  if (akid == nullptr || akid->keyid == nullptr || ASN1_STRING_length(akid->keyid) <= 0) {
    AUTHORITY_KEYID_free(akid);
    *error = "the certificate has no authority key identifier";
    return std::nullopt;
  }
  std::string aki(reinterpret_cast<const char*>(ASN1_STRING_get0_data(akid->keyid)),
                  static_cast<size_t>(ASN1_STRING_length(akid->keyid)));
  AUTHORITY_KEYID_free(akid);
  const ASN1_INTEGER* serial = X509_get0_serialNumber(cert);
  // The DER content octets of the serial: two's complement, so a serial whose first byte has
  // the high bit set gets a leading zero byte (RFC 9773 §4.1's example: 00 87 65 43 21).
  unsigned char* der = nullptr;
  int len = i2d_ASN1_INTEGER(serial, &der);
  if (len < 3) {
    OPENSSL_free(der);
    *error = "the certificate's serial number cannot be encoded";
    return std::nullopt;
  }
  // Skip the tag and the length (short or long form).
  size_t header = 2;
  if (der[1] & 0x80) header += der[1] & 0x7f;
  std::string serial_bytes(reinterpret_cast<char*>(der) + header,
                           static_cast<size_t>(len) - header);
  OPENSSL_free(der);
  return base64url_encode(aki) + "." + base64url_encode(serial_bytes);
}

std::optional<RenewalInfo> parse_renewal_info(std::string_view body, std::string* error) {
  auto doc = parse_object(body, "the renewal information", error);
  if (!doc) return std::nullopt;
  auto window = doc->find("suggestedWindow");
  if (window == doc->end() || !window->is_object()) {
    *error = "the renewal information has no suggestedWindow";
    return std::nullopt;
  }
  auto start = parse_rfc3339(string_member(*window, "start"));
  auto end = parse_rfc3339(string_member(*window, "end"));
  if (!start || !end) {
    *error = "the suggestedWindow's start or end is not an RFC 3339 date";
    return std::nullopt;
  }
  // RFC 9773 §4.2: a window that ends before it starts is to be ignored.
  if (*end < *start) {
    *error = "the suggestedWindow ends before it starts";
    return std::nullopt;
  }
  return RenewalInfo{*start, *end, string_member(*doc, "explanationURL")};
}

time_t pick_in_window(const RenewalInfo& info, uint64_t random) {
  uint64_t span = static_cast<uint64_t>(info.window_end - info.window_start);
  if (span == 0) return info.window_start;
  return info.window_start + static_cast<time_t>(random % (span + 1));
}

time_t renewal_time(time_t not_before, time_t not_after, uint64_t random) {
  if (not_after <= not_before) return not_before;
  uint64_t lifetime = static_cast<uint64_t>(not_after - not_before);
  uint64_t spread = lifetime / 20;
  time_t at = not_before + static_cast<time_t>(lifetime / 3 * 2);
  return at - static_cast<time_t>(spread == 0 ? 0 : random % (spread + 1));
}

}  // namespace peregrine::acme
