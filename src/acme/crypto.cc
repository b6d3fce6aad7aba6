#include "acme/crypto.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include <array>
#include <nlohmann/json.hpp>

namespace peregrine::acme {
namespace {

using json = nlohmann::json;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct BnFree {
  void operator()(BIGNUM* bn) const { BN_free(bn); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* ctx) const { EVP_PKEY_CTX_free(ctx); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG* sig) const { ECDSA_SIG_free(sig); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;

constexpr size_t kP256Bytes = 32;

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<size_t>(len)) : std::string();
}

bool is_p256(EVP_PKEY* key) {
  if (!EVP_PKEY_is_a(key, "EC")) return false;
  char group[64];
  size_t len = 0;
  if (!EVP_PKEY_get_group_name(key, group, sizeof group, &len)) return false;
  std::string_view name(group, len);
  return name == "prime256v1" || name == "P-256" || name == "secp256r1";
}

std::string bn_param(EVP_PKEY* key, const char* param, size_t pad) {
  BIGNUM* raw = nullptr;
  if (!EVP_PKEY_get_bn_param(key, param, &raw)) return {};
  BnPtr bn(raw);
  size_t len = pad != 0 ? pad : static_cast<size_t>(BN_num_bytes(bn.get()));
  std::string out(len, '\0');
  if (pad != 0) {
    if (BN_bn2binpad(bn.get(), reinterpret_cast<unsigned char*>(out.data()),
                     static_cast<int>(pad)) < 0)
      return {};
  } else {
    BN_bn2bin(bn.get(), reinterpret_cast<unsigned char*>(out.data()));
  }
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len))
    return {};
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

std::string openssl_error(std::string_view what) {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  std::string text(what);
  if (code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    text += ": ";
    text += buf;
  }
  return text;
}

std::string base64url_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  auto byte = [&](size_t at) {
    return static_cast<uint32_t>(static_cast<unsigned char>(bytes[at]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
    out += kAlphabet[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = byte(i) << 16;
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
  } else if (rest == 2) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xff);
    }
  }
  // Leftover bits must be zero: otherwise two texts would decode to the same bytes.
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

std::string sha256(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<char*>(digest), sizeof digest);
}

std::string_view key_type_name(KeyType type) {
  return type == KeyType::kRsa2048 ? "rsa2048" : "ecdsa-p256";
}

std::optional<KeyType> parse_key_type(std::string_view name) {
  if (name == "ecdsa-p256" || name == "ec" || name == "p256") return KeyType::kEcdsaP256;
  if (name == "rsa2048" || name == "rsa") return KeyType::kRsa2048;
  return std::nullopt;
}

PkeyPtr generate_key(KeyType type) {
  if (type == KeyType::kRsa2048) return PkeyPtr(EVP_RSA_gen(2048));
  return PkeyPtr(EVP_EC_gen("P-256"));
}

std::string private_key_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || !PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr))
    return {};
  return bio_text(bio.get());
}

PkeyPtr parse_private_key_pem(std::string_view pem, std::string* error) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    *error = openssl_error("not a PEM private key");
    return nullptr;
  }
  if (is_p256(key.get())) return key;
  if (EVP_PKEY_is_a(key.get(), "RSA") && EVP_PKEY_get_bits(key.get()) >= 2048) return key;
  *error = "the key is neither ECDSA P-256 nor RSA of 2048 bits or more";
  return nullptr;
}

AccountKey::AccountKey(PkeyPtr key) : key_(std::move(key)) {
  rsa_ = EVP_PKEY_is_a(key_.get(), "RSA");
  // Built by hand so the member order is RFC 7638's (lexicographic) whatever the JSON library.
  if (rsa_) {
    jwk_ = "{\"e\":\"" + base64url_encode(bn_param(key_.get(), OSSL_PKEY_PARAM_RSA_E, 0)) +
           "\",\"kty\":\"RSA\",\"n\":\"" +
           base64url_encode(bn_param(key_.get(), OSSL_PKEY_PARAM_RSA_N, 0)) + "\"}";
  } else {
    jwk_ = "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"" +
           base64url_encode(bn_param(key_.get(), OSSL_PKEY_PARAM_EC_PUB_X, kP256Bytes)) +
           "\",\"y\":\"" +
           base64url_encode(bn_param(key_.get(), OSSL_PKEY_PARAM_EC_PUB_Y, kP256Bytes)) + "\"}";
  }
  thumbprint_ = base64url_encode(sha256(jwk_));
}

std::optional<AccountKey> AccountKey::from_pem(std::string_view pem, std::string* error) {
  PkeyPtr key = parse_private_key_pem(pem, error);
  if (!key) return std::nullopt;
  return AccountKey(std::move(key));
}

std::string AccountKey::sign(std::string_view signing_input) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key_.get()) != 1)
    return {};
  size_t len = 0;
  auto input = reinterpret_cast<const unsigned char*>(signing_input.data());
  if (EVP_DigestSign(ctx.get(), nullptr, &len, input, signing_input.size()) != 1) return {};
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, input,
                     signing_input.size()) != 1)
    return {};
  sig.resize(len);
  if (rsa_) return sig;
  // OpenSSL gives DER (a SEQUENCE of two INTEGERs); JWS wants R||S, each 32 bytes.
  const unsigned char* p = reinterpret_cast<const unsigned char*>(sig.data());
  std::unique_ptr<ECDSA_SIG, EcdsaSigFree> ecdsa(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(len)));
  if (!ecdsa) return {};
  std::string out(2 * kP256Bytes, '\0');
  auto* raw = reinterpret_cast<unsigned char*>(out.data());
  if (BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa.get()), raw, kP256Bytes) < 0 ||
      BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa.get()), raw + kP256Bytes, kP256Bytes) < 0)
    return {};
  return out;
}

std::string sign_request(const AccountKey& key, std::string_view kid, std::string_view nonce,
                         std::string_view url, std::string_view payload) {
  json header = {{"alg", key.alg()}, {"nonce", nonce}, {"url", url}};
  if (kid.empty()) {
    header["jwk"] = json::parse(key.jwk_json());
  } else {
    header["kid"] = kid;
  }
  std::string protected_b64 =
      base64url_encode(header.dump(-1, ' ', false, json::error_handler_t::replace));
  std::string payload_b64 = base64url_encode(payload);
  std::string signature = key.sign(protected_b64 + "." + payload_b64);
  json jws = {{"protected", protected_b64},
              {"payload", payload_b64},
              {"signature", base64url_encode(signature)}};
  return jws.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::string> external_account_binding(const AccountKey& key, std::string_view eab_kid,
                                                    std::string_view hmac_key_b64url,
                                                    std::string_view new_account_url,
                                                    std::string* error) {
  // CAs hand the MAC key out base64url-encoded; some add padding, which RFC 7515 leaves out.
  std::string_view trimmed = hmac_key_b64url;
  while (!trimmed.empty() && trimmed.back() == '=') trimmed.remove_suffix(1);
  std::optional<std::string> mac_key = base64url_decode(trimmed);
  if (!mac_key || mac_key->empty()) {
    *error = "the external account MAC key is not base64url";
    return std::nullopt;
  }
  json header = {{"alg", "HS256"}, {"kid", eab_kid}, {"url", new_account_url}};
  std::string protected_b64 =
      base64url_encode(header.dump(-1, ' ', false, json::error_handler_t::replace));
  std::string payload_b64 = base64url_encode(key.jwk_json());
  std::string mac = hmac_sha256(*mac_key, protected_b64 + "." + payload_b64);
  json jws = {
      {"protected", protected_b64}, {"payload", payload_b64}, {"signature", base64url_encode(mac)}};
  return jws.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string key_authorization(std::string_view token, const AccountKey& key) {
  std::string out(token);
  out += '.';
  out += key.thumbprint();
  return out;
}

std::string key_authorization_digest(std::string_view key_authorization) {
  return sha256(key_authorization);
}

std::optional<AlpnCertificate> make_tls_alpn_certificate(std::string_view name,
                                                         std::string_view key_authorization,
                                                         std::string* error) {
  AlpnCertificate out;
  out.key = generate_key(KeyType::kEcdsaP256);
  out.certificate.reset(X509_new());
  if (!out.key || !out.certificate) {
    *error = openssl_error("cannot make a key");
    return std::nullopt;
  }
  X509* cert = out.certificate.get();
  X509_set_version(cert, 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BnPtr serial_bn(BN_bin2bn(serial, sizeof serial, nullptr));
  BN_to_ASN1_INTEGER(serial_bn.get(), X509_get_serialNumber(cert));
  X509_gmtime_adj(X509_getm_notBefore(cert), -24 * 3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 7 * 24 * 3600);
  X509_set_pubkey(cert, out.key.get());
  std::string host(name);
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, subject);

  // RFC 8738 names an IP address in an iPAddress entry, a DNS name in a dNSName.
  unsigned char ip[16];
  bool is_ip =
      inet_pton(AF_INET, host.c_str(), ip) == 1 || inet_pton(AF_INET6, host.c_str(), ip) == 1;
  std::string san = (is_ip ? "IP:" : "DNS:") + host;
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* san_ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san.c_str());
  if (san_ext == nullptr) {
    *error = openssl_error("cannot make the subjectAltName of '" + host + "'");
    return std::nullopt;
  }
  X509_add_ext(cert, san_ext, -1);
  X509_EXTENSION_free(san_ext);

  // The extension's value is the DER of an OCTET STRING holding the digest.
  std::string digest = key_authorization_digest(key_authorization);
  std::string der = std::string("\x04\x20", 2) + digest;
  ASN1_OCTET_STRING* value = ASN1_OCTET_STRING_new();
  ASN1_OCTET_STRING_set(value, reinterpret_cast<const unsigned char*>(der.data()),
                        static_cast<int>(der.size()));
  ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
  X509_EXTENSION* acme_ext = X509_EXTENSION_create_by_OBJ(nullptr, oid, 1, value);
  ASN1_OBJECT_free(oid);
  ASN1_OCTET_STRING_free(value);
  if (acme_ext == nullptr) {
    *error = openssl_error("cannot make the acmeIdentifier extension");
    return std::nullopt;
  }
  X509_add_ext(cert, acme_ext, -1);
  X509_EXTENSION_free(acme_ext);
  if (X509_sign(cert, out.key.get(), EVP_sha256()) == 0) {
    *error = openssl_error("cannot sign the TLS-ALPN-01 certificate");
    return std::nullopt;
  }
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  out.certificate_pem = bio_text(bio.get());
  out.key_pem = private_key_pem(out.key.get());
  return out;
}

PkeyPtr public_key_from_jwk(std::string_view jwk_json, std::string* error) {
  json jwk = json::parse(jwk_json, nullptr, false);
  if (!jwk.is_object() || !jwk.contains("kty") || !jwk["kty"].is_string()) {
    *error = "not a JWK";
    return nullptr;
  }
  auto member = [&](const char* name) -> std::optional<std::string> {
    if (!jwk.contains(name) || !jwk[name].is_string()) return std::nullopt;
    return base64url_decode(jwk[name].get<std::string>());
  };
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> build(OSSL_PARAM_BLD_new(),
                                                                        OSSL_PARAM_BLD_free);
  std::string kty = jwk["kty"].get<std::string>();
  std::string point;
  BnPtr n, e;
  if (kty == "EC") {
    auto x = member("x");
    auto y = member("y");
    if (!jwk.contains("crv") || jwk["crv"] != "P-256" || !x || !y || x->size() != kP256Bytes ||
        y->size() != kP256Bytes) {
      *error = "not a P-256 JWK";
      return nullptr;
    }
    point = "\x04" + *x + *y;
    OSSL_PARAM_BLD_push_utf8_string(build.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    OSSL_PARAM_BLD_push_octet_string(build.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                     point.size());
  } else if (kty == "RSA") {
    auto n_bytes = member("n");
    auto e_bytes = member("e");
    if (!n_bytes || !e_bytes || n_bytes->empty() || e_bytes->empty()) {
      *error = "not an RSA JWK";
      return nullptr;
    }
    n.reset(BN_bin2bn(reinterpret_cast<const unsigned char*>(n_bytes->data()),
                      static_cast<int>(n_bytes->size()), nullptr));
    e.reset(BN_bin2bn(reinterpret_cast<const unsigned char*>(e_bytes->data()),
                      static_cast<int>(e_bytes->size()), nullptr));
    OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_N, n.get());
    OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_E, e.get());
  } else {
    *error = "unsupported JWK key type '" + kty + "'";
    return nullptr;
  }
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(build.get());
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, kty == "EC" ? "EC" : "RSA", nullptr));
  EVP_PKEY* raw = nullptr;
  bool ok = params != nullptr && ctx && EVP_PKEY_fromdata_init(ctx.get()) == 1 &&
            EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params) == 1;
  OSSL_PARAM_free(params);
  if (!ok) {
    *error = openssl_error("the JWK is not a valid public key");
    return nullptr;
  }
  return PkeyPtr(raw);
}

bool verify_jws(std::string_view jws_json, EVP_PKEY* key, std::string* error) {
  json jws = json::parse(jws_json, nullptr, false);
  if (!jws.is_object() || !jws.contains("protected") || !jws.contains("payload") ||
      !jws.contains("signature") || !jws["protected"].is_string() || !jws["payload"].is_string() ||
      !jws["signature"].is_string()) {
    *error = "not a flattened JWS";
    return false;
  }
  std::string input = jws["protected"].get<std::string>() + "." + jws["payload"].get<std::string>();
  auto signature = base64url_decode(jws["signature"].get<std::string>());
  if (!signature) {
    *error = "the signature is not base64url";
    return false;
  }
  std::string der = *signature;
  if (EVP_PKEY_is_a(key, "EC")) {
    if (signature->size() != 2 * kP256Bytes) {
      *error = "an ES256 signature is 64 bytes";
      return false;
    }
    auto* raw = reinterpret_cast<const unsigned char*>(signature->data());
    std::unique_ptr<ECDSA_SIG, EcdsaSigFree> ecdsa(ECDSA_SIG_new());
    ECDSA_SIG_set0(ecdsa.get(), BN_bin2bn(raw, kP256Bytes, nullptr),
                   BN_bin2bn(raw + kP256Bytes, kP256Bytes, nullptr));
    unsigned char* out = nullptr;
    int len = i2d_ECDSA_SIG(ecdsa.get(), &out);
    if (len <= 0) {
      *error = "cannot encode the signature";
      return false;
    }
    der.assign(reinterpret_cast<char*>(out), static_cast<size_t>(len));
    OPENSSL_free(out);
  }
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(der.data()), der.size(),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    *error = openssl_error("the signature does not verify");
    return false;
  }
  return true;
}

}  // namespace peregrine::acme
