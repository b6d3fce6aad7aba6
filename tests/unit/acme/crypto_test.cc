#include "acme/crypto.h"

#include <gtest/gtest.h>
#include <openssl/hmac.h>
#include <openssl/x509v3.h>

#include <nlohmann/json.hpp>

namespace peregrine::acme {
namespace {

using json = nlohmann::json;

// RFC 7638 §3.1's example key and thumbprint.
constexpr std::string_view kRfc7638Jwk =
    R"({"kty":"RSA","e":"AQAB","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"})";

json decode_part(const std::string& b64) {
  auto bytes = base64url_decode(b64);
  EXPECT_TRUE(bytes) << b64;
  return json::parse(bytes.value_or("null"));
}

TEST(AcmeBase64url, KnownAnswersWithoutPadding) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode(std::string("\xfb\xff\xfe", 3)), "-__-");
  EXPECT_EQ(base64url_decode("Zm9vYg"), "foob");
  EXPECT_EQ(base64url_decode("-__-"), std::string("\xfb\xff\xfe", 3));
}

TEST(AcmeBase64url, RefusesPaddingOtherAlphabetsAndNonCanonicalTails) {
  EXPECT_FALSE(base64url_decode("Zg=="));
  EXPECT_FALSE(base64url_decode("Zm9v+A"));
  EXPECT_FALSE(base64url_decode("Zm9v/A"));
  EXPECT_FALSE(base64url_decode("Z"));   // 6 bits are no byte
  EXPECT_FALSE(base64url_decode("Zh"));  // "Zg" with a non-zero leftover bit
  EXPECT_FALSE(base64url_decode("Zm 9v"));
}

TEST(AcmeJwk, Rfc7638ThumbprintKnownAnswer) {
  std::string error;
  PkeyPtr key = public_key_from_jwk(kRfc7638Jwk, &error);
  ASSERT_TRUE(key) << error;
  AccountKey account(std::move(key));
  EXPECT_EQ(account.thumbprint(), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
  EXPECT_EQ(account.alg(), "RS256");
  // The JWK has only the required members, in lexicographic order.
  EXPECT_EQ(account.jwk_json().substr(0, 25), R"({"e":"AQAB","kty":"RSA",")");
}

TEST(AcmeJwk, EcKeyHasFixedWidthCoordinatesAndRoundTrips) {
  AccountKey account(generate_key(KeyType::kEcdsaP256));
  json jwk = json::parse(account.jwk_json());
  EXPECT_EQ(jwk.size(), 4u);
  EXPECT_EQ(jwk["kty"], "EC");
  EXPECT_EQ(jwk["crv"], "P-256");
  EXPECT_EQ(base64url_decode(jwk["x"].get<std::string>())->size(), 32u);
  EXPECT_EQ(base64url_decode(jwk["y"].get<std::string>())->size(), 32u);
  EXPECT_EQ(account.jwk_json().substr(0, 30), R"({"crv":"P-256","kty":"EC","x":)");
  std::string error;
  PkeyPtr pub = public_key_from_jwk(account.jwk_json(), &error);
  ASSERT_TRUE(pub) << error;
  EXPECT_EQ(EVP_PKEY_eq(pub.get(), account.key()), 1);
}

TEST(AcmeJwk, PemRoundTripAndRefusals) {
  PkeyPtr key = generate_key(KeyType::kEcdsaP256);
  std::string pem = private_key_pem(key.get());
  EXPECT_NE(pem.find("BEGIN PRIVATE KEY"), std::string::npos);
  std::string error;
  auto account = AccountKey::from_pem(pem, &error);
  ASSERT_TRUE(account) << error;
  EXPECT_EQ(account->thumbprint(), AccountKey(std::move(key)).thumbprint());
  EXPECT_FALSE(AccountKey::from_pem(
      "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", &error));
  EXPECT_NE(error.find("not a PEM private key"), std::string::npos) << error;
  PkeyPtr p384(EVP_EC_gen("P-384"));
  EXPECT_FALSE(parse_private_key_pem(private_key_pem(p384.get()), &error));
  EXPECT_NE(error.find("neither ECDSA P-256 nor RSA"), std::string::npos) << error;
}

TEST(AcmeJws, Es256NewAccountHeaderAndSignatureVerifyWithOpenSsl) {
  AccountKey account(generate_key(KeyType::kEcdsaP256));
  std::string jws = sign_request(account, "", "nonce-1", "https://ca.test/new-acct", R"({"a":1})");
  json doc = json::parse(jws);
  json header = decode_part(doc["protected"]);
  EXPECT_EQ(header["alg"], "ES256");
  EXPECT_EQ(header["nonce"], "nonce-1");
  EXPECT_EQ(header["url"], "https://ca.test/new-acct");
  EXPECT_EQ(header["jwk"], json::parse(account.jwk_json()));
  EXPECT_FALSE(header.contains("kid"));
  EXPECT_EQ(base64url_decode(doc["payload"].get<std::string>()), R"({"a":1})");
  // R||S, not DER.
  EXPECT_EQ(base64url_decode(doc["signature"].get<std::string>())->size(), 64u);

  // Verified against the key rebuilt from the JWK alone, as the CA does.
  std::string error;
  PkeyPtr pub = public_key_from_jwk(account.jwk_json(), &error);
  ASSERT_TRUE(pub) << error;
  EXPECT_TRUE(verify_jws(jws, pub.get(), &error)) << error;

  // A changed payload does not verify.
  doc["payload"] = base64url_encode(R"({"a":2})");
  EXPECT_FALSE(verify_jws(doc.dump(), pub.get(), &error));
}

TEST(AcmeJws, Rs256WithKidAndPostAsGetEmptyPayload) {
  AccountKey account(generate_key(KeyType::kRsa2048));
  std::string jws =
      sign_request(account, "https://ca.test/acct/7", "n2", "https://ca.test/order/1", "");
  json doc = json::parse(jws);
  json header = decode_part(doc["protected"]);
  EXPECT_EQ(header["alg"], "RS256");
  EXPECT_EQ(header["kid"], "https://ca.test/acct/7");
  EXPECT_FALSE(header.contains("jwk"));
  EXPECT_EQ(doc["payload"], "");  // POST-as-GET: empty, not "e30" ({})
  std::string error;
  PkeyPtr pub = public_key_from_jwk(account.jwk_json(), &error);
  ASSERT_TRUE(pub) << error;
  EXPECT_TRUE(verify_jws(jws, pub.get(), &error)) << error;
  EXPECT_EQ(base64url_decode(doc["signature"].get<std::string>())->size(), 256u);
}

TEST(AcmeJws, ExternalAccountBindingIsHs256OverTheJwk) {
  AccountKey account(generate_key(KeyType::kEcdsaP256));
  // pebble's example MAC key (docs: pebble-config-external-account-bindings.json).
  std::string mac_b64 = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
  std::string error;
  auto eab =
      external_account_binding(account, "kid-1", mac_b64, "https://ca.test/new-acct", &error);
  ASSERT_TRUE(eab) << error;
  json doc = json::parse(*eab);
  json header = decode_part(doc["protected"]);
  EXPECT_EQ(header,
            json::parse(R"({"alg":"HS256","kid":"kid-1","url":"https://ca.test/new-acct"})"));
  EXPECT_EQ(base64url_decode(doc["payload"].get<std::string>()), account.jwk_json());
  // Recomputed with OpenSSL's HMAC directly.
  std::string input = doc["protected"].get<std::string>() + "." + doc["payload"].get<std::string>();
  std::string mac_key = *base64url_decode(mac_b64);
  unsigned char out[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), mac_key.data(), static_cast<int>(mac_key.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), out, &len);
  EXPECT_EQ(doc["signature"], base64url_encode(std::string(reinterpret_cast<char*>(out), len)));

  EXPECT_FALSE(external_account_binding(account, "kid-1", "not base64!", "u", &error));
  EXPECT_NE(error.find("MAC key"), std::string::npos);
  // Padding, which some CAs add, is accepted.
  EXPECT_TRUE(external_account_binding(account, "kid-1", "Zm9vYg==", "u", &error));
}

TEST(AcmeKeyAuthorization, Http01AndItsDigest) {
  std::string error;
  AccountKey account(public_key_from_jwk(kRfc7638Jwk, &error));
  EXPECT_EQ(
      key_authorization("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA", account),
      "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
  EXPECT_EQ(key_authorization_digest("abc").size(), 32u);
  EXPECT_EQ(base64url_encode(key_authorization_digest("abc")),
            "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
}

TEST(AcmeTlsAlpn01, CertificateCarriesNameAndCriticalAcmeIdentifier) {
  std::string error;
  auto cert = make_tls_alpn_certificate("a.example.test", "tok.thumb", &error);
  ASSERT_TRUE(cert) << error;
  X509* x = cert->certificate.get();
  EXPECT_EQ(X509_check_host(x, "a.example.test", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(x, "b.example.test", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_verify(x, cert->key.get()), 1);  // self-signed
  ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
  int at = X509_get_ext_by_OBJ(x, oid, -1);
  ASN1_OBJECT_free(oid);
  ASSERT_GE(at, 0);
  X509_EXTENSION* ext = X509_get_ext(x, at);
  EXPECT_EQ(X509_EXTENSION_get_critical(ext), 1);
  ASN1_OCTET_STRING* data = X509_EXTENSION_get_data(ext);
  std::string der(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                  static_cast<size_t>(ASN1_STRING_length(data)));
  EXPECT_EQ(der, std::string("\x04\x20", 2) + key_authorization_digest("tok.thumb"));
  EXPECT_NE(cert->certificate_pem.find("BEGIN CERTIFICATE"), std::string::npos);

  auto ip = make_tls_alpn_certificate("127.0.0.1", "tok.thumb", &error);
  ASSERT_TRUE(ip) << error;
  EXPECT_EQ(X509_check_ip_asc(ip->certificate.get(), "127.0.0.1", 0), 1);
}

TEST(AcmeJwk, DamagedJwksAreRefused) {
  std::string error;
  EXPECT_FALSE(public_key_from_jwk("nope", &error));
  EXPECT_FALSE(public_key_from_jwk(R"({"kty":"EC","crv":"P-384","x":"AA","y":"AA"})", &error));
  EXPECT_FALSE(public_key_from_jwk(R"({"kty":"EC","crv":"P-256","x":"AA","y":"AA"})", &error));
  EXPECT_FALSE(public_key_from_jwk(R"({"kty":"oct","k":"AA"})", &error));
  EXPECT_NE(error.find("oct"), std::string::npos);
  EXPECT_FALSE(public_key_from_jwk(R"({"kty":"RSA","n":5})", &error));
}

}  // namespace
}  // namespace peregrine::acme
