#include "acme/messages.h"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/x509v3.h>

#include <nlohmann/json.hpp>

namespace peregrine::acme {
namespace {

using json = nlohmann::json;

TEST(AcmeDirectory, ParsesUrlsMetaAndRenewalInfo) {
  std::string error;
  auto dir = parse_directory(R"({
    "newNonce": "https://ca/nonce", "newAccount": "https://ca/acct", "newOrder": "https://ca/order",
    "revokeCert": "https://ca/revoke", "keyChange": "https://ca/key", "renewalInfo": "https://ca/ari",
    "meta": {"termsOfService": "https://ca/tos", "externalAccountRequired": true}})",
                             &error);
  ASSERT_TRUE(dir) << error;
  EXPECT_EQ(dir->new_nonce, "https://ca/nonce");
  EXPECT_EQ(dir->new_account, "https://ca/acct");
  EXPECT_EQ(dir->new_order, "https://ca/order");
  EXPECT_EQ(dir->revoke_cert, "https://ca/revoke");
  EXPECT_EQ(dir->renewal_info, "https://ca/ari");
  EXPECT_EQ(dir->terms_of_service, "https://ca/tos");
  EXPECT_TRUE(dir->external_account_required);
}

TEST(AcmeDirectory, RefusesMissingUrlsAndNonObjects) {
  std::string error;
  EXPECT_FALSE(parse_directory("[1]", &error));
  EXPECT_EQ(error, "the directory is not a JSON object");
  EXPECT_FALSE(parse_directory("{not json", &error));
  EXPECT_FALSE(parse_directory(R"({"newNonce":"a","newAccount":"b"})", &error));
  EXPECT_EQ(error, "the directory has no newOrder URL");
  // A member of the wrong type is missing, not a crash.
  EXPECT_FALSE(parse_directory(R"({"newNonce":1,"newAccount":"b","newOrder":"c"})", &error));
  EXPECT_EQ(error, "the directory has no newNonce URL");
}

TEST(AcmeProblem, ShortTypeDescribeAndSubproblems) {
  auto p = parse_problem(R"({"type":"urn:ietf:params:acme:error:rejectedIdentifier","status":400,
    "detail":"Some identifiers were rejected","subproblems":[
      {"type":"urn:ietf:params:acme:error:malformed","detail":"Invalid underscore in DNS name",
       "identifier":{"type":"dns","value":"_example.org"}}]})");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->is("rejectedIdentifier"));
  ASSERT_EQ(p->subproblems.size(), 1u);
  EXPECT_EQ(
      p->describe(),
      "rejectedIdentifier: Some identifiers were rejected (HTTP 400); malformed: _example.org: "
      "Invalid underscore in DNS name");
  auto other = parse_problem(R"({"type":"about:blank","detail":"x"})");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->short_type(), "about:blank");
  EXPECT_FALSE(parse_problem(R"({"detail":"no type"})"));
  EXPECT_FALSE(parse_problem("<html>"));
}

TEST(AcmeOrder, ParsesStatusIdentifiersAuthorizationsAndError) {
  std::string error;
  auto order = parse_order(R"({"status":"invalid","expires":"2026-01-01T00:00:00Z",
    "identifiers":[{"type":"dns","value":"a.test"},{"type":"ip","value":"127.0.0.1"}],
    "authorizations":["https://ca/authz/1","https://ca/authz/2"],
    "finalize":"https://ca/finalize/1",
    "error":{"type":"urn:ietf:params:acme:error:unauthorized","detail":"no"}})",
                           &error);
  ASSERT_TRUE(order) << error;
  EXPECT_EQ(order->status, Status::kInvalid);
  ASSERT_EQ(order->identifiers.size(), 2u);
  EXPECT_EQ(order->identifiers[1].type, "ip");
  EXPECT_EQ(order->authorizations[1], "https://ca/authz/2");
  EXPECT_EQ(order->finalize, "https://ca/finalize/1");
  ASSERT_TRUE(order->error);
  EXPECT_TRUE(order->error->is("unauthorized"));
  EXPECT_FALSE(parse_order(R"({"status":"valid"})", &error));
  EXPECT_EQ(error, "the order has no finalize URL");
  EXPECT_FALSE(parse_order(R"({"status":"sleeping","finalize":"x"})", &error));
  EXPECT_EQ(error, "the order has no known status");
}

TEST(AcmeAuthorization, ParsesChallengesAndDropsUnsafeTokens) {
  std::string error;
  auto authz =
      parse_authorization(R"({"status":"pending","identifier":{"type":"dns","value":"a.test"},
    "challenges":[
      {"type":"http-01","url":"https://ca/chall/1","token":"DGyRejmCefe7v4NfDGDKfA12345678","status":"pending"},
      {"type":"tls-alpn-01","url":"https://ca/chall/2","token":"../../etc/passwd/aaaaaaaaaaaaa","status":"pending"},
      {"type":"dns-01","url":"https://ca/chall/3","token":"DGyRejmCefe7v4NfDGDKfA12345678","status":"pending"},
      {"type":"new-02","url":"https://ca/chall/4","status":"pending"}]})",
                          &error);
  ASSERT_TRUE(authz) << error;
  EXPECT_EQ(authz->identifier.value, "a.test");
  EXPECT_EQ(authz->status, Status::kPending);
  ASSERT_EQ(authz->challenges.size(), 3u);  // the path-traversing token is dropped
  EXPECT_EQ(authz->challenges[0].type, "http-01");
  EXPECT_EQ(authz->challenges[1].type, "dns-01");
  EXPECT_EQ(authz->challenges[2].type, "new-02");
  EXPECT_FALSE(parse_authorization(R"({"status":"pending"})", &error));
}

TEST(AcmeChallenge, InvalidCarriesItsError) {
  std::string error;
  auto ch = parse_challenge(R"({"type":"http-01","url":"u","token":"t","status":"invalid",
    "error":{"type":"urn:ietf:params:acme:error:connection","detail":"refused"}})",
                            &error);
  ASSERT_TRUE(ch) << error;
  EXPECT_EQ(ch->status, Status::kInvalid);
  ASSERT_TRUE(ch->error);
  EXPECT_EQ(ch->error->describe(), "connection: refused");
}

TEST(AcmePayloads, NewAccountNewOrderFinalize) {
  json acct = json::parse(new_account_payload({"admin@a.test", "mailto:b@a.test"}, true, ""));
  EXPECT_EQ(acct, json::parse(R"({"termsOfServiceAgreed":true,
                                  "contact":["mailto:admin@a.test","mailto:b@a.test"]})"));
  json with_eab = json::parse(
      new_account_payload({}, false, R"({"protected":"p","payload":"q","signature":"s"})"));
  EXPECT_EQ(
      with_eab,
      json::parse(R"({"externalAccountBinding":{"protected":"p","payload":"q","signature":"s"}})"));
  EXPECT_EQ(json::parse(new_order_payload({"a.test", "127.0.0.1", "::1"})),
            json::parse(R"({"identifiers":[{"type":"dns","value":"a.test"},
              {"type":"ip","value":"127.0.0.1"},{"type":"ip","value":"::1"}]})"));
  EXPECT_EQ(finalize_payload(std::string("\x30\x82", 2)), R"({"csr":"MII"})");
  EXPECT_EQ(challenge_response_payload(), "{}");
}

TEST(AcmeCsr, NamesInSubjectAltNameSignedByTheKey) {
  PkeyPtr key = generate_key(KeyType::kEcdsaP256);
  std::string error;
  auto der = make_csr_der({"a.test", "www.a.test", "127.0.0.1"}, key.get(), &error);
  ASSERT_TRUE(der) << error;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der->data());
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> req(
      d2i_X509_REQ(nullptr, &p, static_cast<long>(der->size())), X509_REQ_free);
  ASSERT_TRUE(req);
  EXPECT_EQ(X509_REQ_verify(req.get(), key.get()), 1);
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req.get());
  ASSERT_NE(exts, nullptr);
  auto* names =
      static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts, NID_subject_alt_name, nullptr, nullptr));
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(sk_GENERAL_NAME_num(names), 3);
  EXPECT_EQ(sk_GENERAL_NAME_value(names, 0)->type, GEN_DNS);
  EXPECT_EQ(sk_GENERAL_NAME_value(names, 2)->type, GEN_IPADD);
  GENERAL_NAMES_free(names);
  EXPECT_FALSE(make_csr_der({"a.test,DNS:evil.test"}, key.get(), &error));
  EXPECT_FALSE(make_csr_der({}, key.get(), &error));
}

TEST(AcmeRetryAfter, SecondsAndDates) {
  time_t now = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("120", now), std::chrono::seconds(120));
  EXPECT_EQ(parse_retry_after(" 0 ", now), std::chrono::seconds(0));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now), std::chrono::seconds(60));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:40:37 GMT", now), std::chrono::seconds(0));
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("-5", now));
  EXPECT_FALSE(parse_retry_after("", now));
}

TEST(AcmeRfc3339, ZuluFractionsAndOffsets) {
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339("2021-01-03T00:00:00Z"), 1609632000);
  EXPECT_EQ(parse_rfc3339("2021-01-03T00:00:00.123456Z"), 1609632000);
  EXPECT_EQ(parse_rfc3339("2021-01-03T02:00:00+02:00"), 1609632000);
  EXPECT_EQ(parse_rfc3339("2021-01-02T23:00:00-01:00"), 1609632000);
  EXPECT_FALSE(parse_rfc3339("2021-01-03"));
  EXPECT_FALSE(parse_rfc3339("2021-13-03T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339("2021-01-03T00:00:00"));
  EXPECT_FALSE(parse_rfc3339("2021-01-03T00:00:00Zjunk"));
}

// A certificate with the AKI and serial of RFC 9773 §4.1's example.
X509Ptr ari_example_certificate() {
  X509Ptr cert(X509_new());
  BIGNUM* serial = nullptr;
  BN_hex2bn(&serial, "87654321");
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  AUTHORITY_KEYID* akid = AUTHORITY_KEYID_new();
  akid->keyid = ASN1_OCTET_STRING_new();
  const unsigned char id[] = {0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3,
                              0x7B, 0x84, 0x7B, 0xA0, 0xAE, 0x2C, 0xDE, 0x01, 0xC8, 0xD4};
  ASN1_OCTET_STRING_set(akid->keyid, id, sizeof id);
  X509_add1_ext_i2d(cert.get(), NID_authority_key_identifier, akid, 0, X509V3_ADD_DEFAULT);
  AUTHORITY_KEYID_free(akid);
  return cert;
}

TEST(AcmeRenewalInfo, CertificateIdKnownAnswer) {
  X509Ptr cert = ari_example_certificate();
  std::string error;
  EXPECT_EQ(ari_certificate_id(cert.get(), &error), "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE") << error;
  X509Ptr bare(X509_new());
  EXPECT_FALSE(ari_certificate_id(bare.get(), &error));
  EXPECT_EQ(error, "the certificate has no authority key identifier");
}

TEST(AcmeRenewalInfo, SuggestedWindowAndAPickInsideIt) {
  std::string error;
  auto info = parse_renewal_info(R"({"suggestedWindow":{"start":"2021-01-03T00:00:00Z",
    "end":"2021-01-07T00:00:00Z"},"explanationURL":"https://ca/why"})",
                                 &error);
  ASSERT_TRUE(info) << error;
  EXPECT_EQ(info->window_start, 1609632000);
  EXPECT_EQ(info->window_end, 1609632000 + 4 * 86400);
  EXPECT_EQ(info->explanation_url, "https://ca/why");
  for (uint64_t r : {0ull, 1ull, 345600ull, 345601ull, ~0ull}) {
    time_t t = pick_in_window(*info, r);
    EXPECT_GE(t, info->window_start);
    EXPECT_LE(t, info->window_end);
  }
  EXPECT_FALSE(parse_renewal_info(R"({"suggestedWindow":{"start":"2021-01-07T00:00:00Z",
    "end":"2021-01-03T00:00:00Z"}})",
                                  &error));
  EXPECT_EQ(error, "the suggestedWindow ends before it starts");
  EXPECT_FALSE(parse_renewal_info(R"({"suggestedWindow":{"start":"tomorrow","end":"x"}})", &error));
  EXPECT_FALSE(parse_renewal_info(R"({})", &error));
}

TEST(AcmeRenewal, TwoThirdsIntoTheLifetimeWithSpread) {
  time_t start = 1'000'000;
  time_t end = start + 90 * 86400;
  EXPECT_EQ(renewal_time(start, end, 0), start + 60 * 86400);
  time_t earliest = start + 60 * 86400 - 90 * 86400 / 20;  // 4.5 days earlier at most
  for (uint64_t r : {1ull, 12345ull, 388800ull, ~0ull}) {
    time_t t = renewal_time(start, end, r);
    EXPECT_GE(t, earliest);
    EXPECT_LE(t, start + 60 * 86400);
  }
  EXPECT_EQ(renewal_time(start, start, 7), start);  // damaged dates: renew now
}

TEST(AcmeChain, ParsesEveryCertificateAndRefusesDamage) {
  std::string error;
  auto cert = make_tls_alpn_certificate("a.test", "k", &error);
  ASSERT_TRUE(cert) << error;
  std::string two = cert->certificate_pem + "\n" + cert->certificate_pem;
  auto chain = parse_pem_chain(two, &error);
  ASSERT_TRUE(chain) << error;
  EXPECT_EQ(chain->size(), 2u);
  auto not_after = certificate_not_after((*chain)[0].get());
  ASSERT_TRUE(not_after);
  EXPECT_GT(*not_after, time(nullptr));
  EXPECT_FALSE(parse_pem_chain("", &error));
  EXPECT_EQ(error, "the chain holds no certificate");
  EXPECT_FALSE(parse_pem_chain(cert->certificate_pem + "garbage", &error));
  EXPECT_NE(error.find("certificate 2"), std::string::npos) << error;
  std::string cut = cert->certificate_pem.substr(0, cert->certificate_pem.size() / 2);
  EXPECT_FALSE(parse_pem_chain(cut, &error));
  EXPECT_EQ(error, "certificate 1 of the chain is cut short");
}

}  // namespace
}  // namespace peregrine::acme
