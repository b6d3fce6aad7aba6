// The order state machine against a scripted CA, message by message: every signed request is
// checked (signature against the JWK, nonce, url, jwk or kid) the way a CA would.
#include "acme/order.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

namespace peregrine::acme {
namespace {

using json = nlohmann::json;
using Kind = Action::Kind;

constexpr std::string_view kDirectory = R"({"newNonce":"https://ca.test/nonce",
  "newAccount":"https://ca.test/acct","newOrder":"https://ca.test/order",
  "meta":{"termsOfService":"https://ca.test/tos"}})";
constexpr std::string_view kToken = "DGyRejmCefe7v4NfDGDKfA_-token";

class FakeCa {
 public:
  explicit FakeCa(const AccountKey& key) : key_(key) {
    std::string error;
    pub_ = public_key_from_jwk(key.jwk_json(), &error);
  }

  // A response with a fresh Replay-Nonce, as every ACME response has.
  Response reply(int status, std::string body,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
    Response r;
    r.status = status;
    r.body = std::move(body);
    r.headers = std::move(headers);
    last_nonce_ = "nonce-" + std::to_string(++nonces_);
    r.headers.emplace_back("Replay-Nonce", last_nonce_);
    return r;
  }
  Response problem(int status, std::string_view type, std::string_view detail,
                   std::vector<std::pair<std::string, std::string>> headers = {}) {
    headers.emplace_back("Content-Type", "application/problem+json");
    return reply(status,
                 json{{"type", "urn:ietf:params:acme:error:" + std::string(type)},
                      {"detail", detail},
                      {"status", status}}
                     .dump(),
                 std::move(headers));
  }

  // Checks a signed POST as a CA would and returns its payload.
  json accept(const Action& a, std::string_view url, bool expect_jwk = false) {
    EXPECT_EQ(a.kind, Kind::kSend);
    EXPECT_EQ(a.request.method, "POST");
    EXPECT_EQ(a.request.url, url);
    EXPECT_EQ(a.request.content_type, "application/jose+json");
    std::string error;
    EXPECT_TRUE(verify_jws(a.request.body, pub_.get(), &error)) << error;
    json jws = json::parse(a.request.body);
    json header = json::parse(*base64url_decode(jws["protected"].get<std::string>()));
    EXPECT_EQ(header["nonce"], last_nonce_) << "each POST carries the newest nonce";
    EXPECT_EQ(header["url"], url);
    EXPECT_EQ(header["alg"], "ES256");
    if (expect_jwk) {
      EXPECT_EQ(header["jwk"], json::parse(key_.jwk_json()));
      EXPECT_FALSE(header.contains("kid"));
    } else {
      EXPECT_EQ(header["kid"], "https://ca.test/acct/1");
      EXPECT_FALSE(header.contains("jwk"));
    }
    std::string payload = *base64url_decode(jws["payload"].get<std::string>());
    return payload.empty() ? json() : json::parse(payload);
  }

 private:
  const AccountKey& key_;
  PkeyPtr pub_;
  std::string last_nonce_;
  int nonces_ = 0;
};

std::string order_json(std::string_view status, std::string_view certificate = "") {
  json o = {{"status", status},
            {"identifiers", {{{"type", "dns"}, {"value", "a.test"}}}},
            {"authorizations", {"https://ca.test/authz/1"}},
            {"finalize", "https://ca.test/finalize/1"}};
  if (!certificate.empty()) o["certificate"] = certificate;
  return o.dump();
}

std::string authz_json(std::string_view status, std::string_view challenge_status = "pending",
                       std::string_view type = "http-01", std::string challenge_error = "") {
  json ch = {{"type", type},
             {"url", "https://ca.test/chall/1"},
             {"token", kToken},
             {"status", challenge_status}};
  if (!challenge_error.empty()) ch["error"] = json::parse(challenge_error);
  return json{{"status", status},
              {"identifier", {{"type", "dns"}, {"value", "a.test"}}},
              {"challenges", {ch}}}
      .dump();
}

class AcmeOrderMachine : public ::testing::Test {
 protected:
  AcmeOrderMachine()
      : key_(generate_key(KeyType::kEcdsaP256)),
        cert_key_(generate_key(KeyType::kEcdsaP256)),
        ca_(key_) {
    options_.directory_url = "https://ca.test/dir";
    options_.names = {"a.test"};
    options_.contacts = {"admin@a.test"};
  }

  // directory → newNonce → newAccount → newOrder, ending with the order's answer sent.
  Action through_new_order(OrderMachine& m, std::string order_body = "") {
    Action a = m.start();
    EXPECT_EQ(a.kind, Kind::kSend);
    EXPECT_EQ(a.request.method, "GET");
    EXPECT_EQ(a.request.url, "https://ca.test/dir");
    a = m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
    EXPECT_EQ(a.step, Step::kNonce);
    EXPECT_EQ(a.request.method, "HEAD");
    EXPECT_EQ(a.request.url, "https://ca.test/nonce");
    a = m.on_response(ca_.reply(200, ""), 0);
    json acct = ca_.accept(a, "https://ca.test/acct", true);
    EXPECT_EQ(acct["termsOfServiceAgreed"], true);
    a = m.on_response(
        ca_.reply(201, R"({"status":"valid"})", {{"Location", "https://ca.test/acct/1"}}), 0);
    json order = ca_.accept(a, "https://ca.test/order");
    EXPECT_EQ(order["identifiers"][0]["value"], "a.test");
    return m.on_response(ca_.reply(201, order_body.empty() ? order_json("pending") : order_body,
                                   {{"Location", "https://ca.test/order/1"}}),
                         0);
  }

  AccountKey key_;
  PkeyPtr cert_key_;
  FakeCa ca_;
  OrderOptions options_;
};

TEST_F(AcmeOrderMachine, HappyPathWithPollingAndRetryAfter) {
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m);
  EXPECT_EQ(m.account_url(), "https://ca.test/acct/1");
  EXPECT_EQ(m.order_url(), "https://ca.test/order/1");
  EXPECT_TRUE(ca_.accept(a, "https://ca.test/authz/1").is_null());  // POST-as-GET
  a = m.on_response(ca_.reply(200, authz_json("pending")), 0);
  ASSERT_EQ(a.kind, Kind::kProvision);
  EXPECT_EQ(a.provision.challenge_type, "http-01");
  EXPECT_EQ(a.provision.identifier, "a.test");
  EXPECT_EQ(a.provision.token, kToken);
  EXPECT_EQ(a.provision.key_authorization, std::string(kToken) + "." + key_.thumbprint());
  a = m.on_provisioned();
  EXPECT_EQ(ca_.accept(a, "https://ca.test/chall/1"), json::object());  // {}: ready
  a = m.on_response(
      ca_.reply(
          200,
          R"({"type":"http-01","url":"https://ca.test/chall/1","token":"t","status":"processing"})",
          {{"Retry-After", "3"}}),
      0);
  ASSERT_EQ(a.kind, Kind::kWait);
  EXPECT_EQ(a.wait, std::chrono::seconds(3));
  a = m.on_wait_over();
  ca_.accept(a, "https://ca.test/authz/1");
  a = m.on_response(ca_.reply(200, authz_json("pending", "processing"), {{"Retry-After", "2"}}), 0);
  ASSERT_EQ(a.kind, Kind::kWait);
  EXPECT_EQ(a.wait, std::chrono::seconds(2));
  a = m.on_wait_over();
  ca_.accept(a, "https://ca.test/authz/1");
  a = m.on_response(ca_.reply(200, authz_json("valid", "valid")), 0);
  ASSERT_EQ(a.kind, Kind::kWait);  // then the order, first soon
  EXPECT_EQ(a.wait, options_.first_poll);
  a = m.on_wait_over();
  ca_.accept(a, "https://ca.test/order/1");
  a = m.on_response(ca_.reply(200, order_json("ready")), 0);
  json fin = ca_.accept(a, "https://ca.test/finalize/1");
  ASSERT_TRUE(fin["csr"].is_string());
  std::string der = *base64url_decode(fin["csr"].get<std::string>());
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  X509_REQ* req = d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size()));
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(X509_REQ_verify(req, cert_key_.get()), 1);  // the certificate's key, not the account's
  X509_REQ_free(req);
  a = m.on_response(ca_.reply(200, order_json("processing"), {{"Retry-After", "1"}}), 0);
  ASSERT_EQ(a.kind, Kind::kWait);
  EXPECT_EQ(a.wait, std::chrono::seconds(1));
  a = m.on_wait_over();
  ca_.accept(a, "https://ca.test/order/1");
  a = m.on_response(ca_.reply(200, order_json("valid", "https://ca.test/cert/1")), 0);
  ca_.accept(a, "https://ca.test/cert/1");
  EXPECT_EQ(a.request.accept, "application/pem-certificate-chain");
  std::string error;
  auto pem = make_tls_alpn_certificate("a.test", "x", &error);
  a = m.on_response(
      ca_.reply(200, pem->certificate_pem, {{"Content-Type", "application/pem-certificate-chain"}}),
      0);
  ASSERT_EQ(a.kind, Kind::kDone) << a.error;
  EXPECT_EQ(a.chain_pem, pem->certificate_pem);
  EXPECT_TRUE(m.finished());
  EXPECT_EQ(m.on_response(ca_.reply(200, ""), 0).kind, Kind::kFailed);
}

TEST_F(AcmeOrderMachine, BadNonceResendsWithTheNewNonceAFewTimes) {
  options_.max_nonce_retries = 2;
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = m.start();
  a = m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
  a = m.on_response(ca_.reply(200, ""), 0);
  json first = ca_.accept(a, "https://ca.test/acct", true);
  a = m.on_response(ca_.problem(400, "badNonce", "stale"), 0);
  EXPECT_EQ(ca_.accept(a, "https://ca.test/acct", true), first);  // the same request, newest nonce
  a = m.on_response(ca_.problem(400, "badNonce", "stale"), 0);
  ca_.accept(a, "https://ca.test/acct", true);
  a = m.on_response(ca_.problem(400, "badNonce", "stale"), 0);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.error, "newAccount: badNonce: stale (HTTP 400)");
}

TEST_F(AcmeOrderMachine, BadNonceWithoutANewNonceAsksForOne) {
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = m.start();
  a = m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
  a = m.on_response(ca_.reply(200, ""), 0);
  Response bad{400,
               {{"Content-Type", "application/problem+json"}},
               R"({"type":"urn:ietf:params:acme:error:badNonce","detail":"x"})"};
  a = m.on_response(bad, 0);
  EXPECT_EQ(a.step, Step::kNonce);
  EXPECT_EQ(a.request.method, "HEAD");
  a = m.on_response(ca_.reply(200, ""), 0);
  ca_.accept(a, "https://ca.test/acct", true);
}

TEST_F(AcmeOrderMachine, InvalidChallengeFailsWithTheCasReason) {
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m);
  a = m.on_response(ca_.reply(200, authz_json("pending")), 0);
  a = m.on_provisioned();
  a = m.on_response(
      ca_.reply(200, R"({"type":"http-01","url":"u","token":"t","status":"pending"})"), 0);
  a = m.on_wait_over();
  a = m.on_response(
      ca_.reply(
          200,
          authz_json(
              "invalid", "invalid", "http-01",
              R"({"type":"urn:ietf:params:acme:error:connection","detail":"127.0.0.1: Connection refused"})")),
      0);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.step, Step::kPollAuthorization);
  EXPECT_EQ(a.error,
            "authorization poll: the authorization for a.test is invalid: http-01: connection: "
            "127.0.0.1: Connection refused");
}

TEST_F(AcmeOrderMachine, RateLimitedKeepsTheProblemAndRetryAfter) {
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = m.start();
  a = m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
  a = m.on_response(ca_.reply(200, ""), 0);
  a = m.on_response(ca_.reply(201, "{}", {{"Location", "https://ca.test/acct/1"}}), 0);
  a = m.on_response(ca_.problem(429, "rateLimited", "too many certificates for a.test",
                                {{"Retry-After", "3600"}}),
                    0);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.step, Step::kNewOrder);
  EXPECT_EQ(a.error, "newOrder: rateLimited: too many certificates for a.test (HTTP 429)");
  ASSERT_TRUE(a.problem);
  EXPECT_TRUE(a.problem->is("rateLimited"));
  EXPECT_EQ(a.retry_after, std::chrono::seconds(3600));
}

TEST_F(AcmeOrderMachine, ServerErrorWithoutAProblemDocument) {
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = m.start();
  a = m.on_response(Response{503, {{"Retry-After", "30"}}, "<html>down</html>"}, 0);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.error, "directory: HTTP 503 without a problem document");
  EXPECT_EQ(a.retry_after, std::chrono::seconds(30));
}

TEST_F(AcmeOrderMachine, PrefersTheConfiguredChallengeTypeAndSaysWhenNoneFits) {
  options_.challenge_types = {"tls-alpn-01", "http-01"};
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m);
  json authz = json::parse(authz_json("pending"));
  authz["challenges"].push_back({{"type", "tls-alpn-01"},
                                 {"url", "https://ca.test/chall/2"},
                                 {"token", kToken},
                                 {"status", "pending"}});
  a = m.on_response(ca_.reply(200, authz.dump()), 0);
  ASSERT_EQ(a.kind, Kind::kProvision);
  EXPECT_EQ(a.provision.challenge_type, "tls-alpn-01");
  ca_.accept(m.on_provisioned(), "https://ca.test/chall/2");

  OrderMachine only_dns(options_, key_, cert_key_.get());
  a = through_new_order(only_dns);
  a = only_dns.on_response(ca_.reply(200, authz_json("pending", "pending", "dns-01")), 0);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.error,
            "authorization: the CA offers dns-01 for a.test, none of which this client answers");
}

TEST_F(AcmeOrderMachine, ExternalAccountBindingRequiredButNotGiven) {
  OrderMachine m(options_, key_, cert_key_.get());
  m.start();
  json dir = json::parse(kDirectory);
  dir["meta"]["externalAccountRequired"] = true;
  Action a = m.on_response(Response{200, {}, dir.dump()}, 0);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_NE(a.error.find("requires External Account Binding"), std::string::npos) << a.error;
}

TEST_F(AcmeOrderMachine, ExternalAccountBindingGoesInNewAccount) {
  options_.eab_kid = "kid-1";
  options_.eab_hmac_key = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
  OrderMachine m(options_, key_, cert_key_.get());
  m.start();
  m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
  Action a = m.on_response(ca_.reply(200, ""), 0);
  json payload = ca_.accept(a, "https://ca.test/acct", true);
  ASSERT_TRUE(payload.contains("externalAccountBinding"));
  json eab_header = json::parse(
      *base64url_decode(payload["externalAccountBinding"]["protected"].get<std::string>()));
  EXPECT_EQ(eab_header["kid"], "kid-1");
  EXPECT_EQ(eab_header["url"], "https://ca.test/acct");
}

TEST_F(AcmeOrderMachine, GivesUpAfterMaxPolls) {
  options_.max_polls = 3;
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m, order_json("processing"));
  int waits = 0;
  while (a.kind == Kind::kWait) {
    ++waits;
    a = m.on_wait_over();
    a = m.on_response(ca_.reply(200, order_json("processing")), 0);
  }
  EXPECT_EQ(waits, 3);
  ASSERT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.error, "order poll: still not done after 3 polls");
}

TEST_F(AcmeOrderMachine, RetryAfterIsCappedAndReadAsADate) {
  options_.max_poll = std::chrono::seconds(10);
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m, order_json("processing"));
  a = m.on_wait_over();
  a = m.on_response(ca_.reply(200, order_json("processing"), {{"Retry-After", "86400"}}), 0);
  EXPECT_EQ(a.wait, std::chrono::seconds(10));
  a = m.on_wait_over();
  a = m.on_response(
      ca_.reply(200, order_json("processing"), {{"Retry-After", "Sun, 06 Nov 1994 08:49:42 GMT"}}),
      784111777);
  EXPECT_EQ(a.wait, std::chrono::seconds(5));
}

TEST_F(AcmeOrderMachine, DamagedAnswersFailClearly) {
  {
    OrderMachine m(options_, key_, cert_key_.get());
    m.start();
    Action a = m.on_response(Response{200, {}, "not json"}, 0);
    EXPECT_EQ(a.error, "directory: the directory is not a JSON object");
  }
  {
    OrderMachine m(options_, key_, cert_key_.get());
    m.start();
    m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
    Action a = m.on_response(Response{200, {}, ""}, 0);  // no Replay-Nonce
    EXPECT_EQ(a.error, "newNonce: the CA sent no Replay-Nonce (HTTP 200)");
  }
  {
    OrderMachine m(options_, key_, cert_key_.get());
    m.start();
    m.on_response(Response{200, {}, std::string(kDirectory)}, 0);
    m.on_response(ca_.reply(200, ""), 0);
    Action a = m.on_response(ca_.reply(201, "{}"), 0);  // no Location
    EXPECT_EQ(a.error, "newAccount: the CA sent no account URL (Location)");
  }
  {
    OrderMachine m(options_, key_, cert_key_.get());
    Action a = through_new_order(m, order_json("valid", "https://ca.test/cert/1"));
    a = m.on_response(ca_.reply(200, "<html>oops</html>"), 0);
    EXPECT_EQ(
        a.error,
        "certificate: certificate 1 of the chain does not start with -----BEGIN CERTIFICATE-----");
  }
  {
    options_.names.clear();
    OrderMachine m(options_, key_, cert_key_.get());
    EXPECT_EQ(m.start().error, "directory: the order names no host");
  }
}

TEST_F(AcmeOrderMachine, AlreadyValidAuthorizationIsSkipped) {
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m);
  a = m.on_response(ca_.reply(200, authz_json("valid", "valid")), 0);
  ASSERT_EQ(a.kind, Kind::kWait);
  a = m.on_wait_over();
  ca_.accept(a, "https://ca.test/order/1");
}

}  // namespace
}  // namespace peregrine::acme

namespace peregrine::acme {
namespace {

TEST_F(AcmeOrderMachine, PollsWithoutRetryAfterDoubleUpToTheDefault) {
  options_.first_poll = std::chrono::milliseconds(250);
  options_.default_poll = std::chrono::milliseconds(1500);
  OrderMachine m(options_, key_, cert_key_.get());
  Action a = through_new_order(m, order_json("processing"));
  std::vector<long> waits;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(a.kind, Kind::kWait);
    waits.push_back(static_cast<long>(a.wait.count()));
    a = m.on_wait_over();
    a = m.on_response(ca_.reply(200, order_json("processing")), 0);
  }
  EXPECT_EQ(waits, (std::vector<long>{250, 500, 1000, 1500, 1500}));
}

}  // namespace
}  // namespace peregrine::acme

namespace peregrine::acme {
namespace {

// What a fuzzer would do to the machine, deterministically: any response (hostile statuses,
// headers with bytes that are not UTF-8, bodies cut or of the wrong shape) at any step. The
// machine never throws or crashes, and every order ends (done or failed) within a bound.
TEST_F(AcmeOrderMachine, AnySequenceOfResponsesEndsCleanly) {
  const std::vector<std::string> bodies = {
      std::string(kDirectory),
      order_json("pending"),
      order_json("ready"),
      order_json("processing"),
      order_json("valid", "https://ca.test/cert/1"),
      order_json("invalid"),
      authz_json("pending"),
      authz_json("valid", "valid"),
      authz_json("invalid", "invalid", "http-01", R"({"type":"x","detail":"\u0000"})"),
      R"({"type":"http-01","url":"u","token":"t","status":"valid"})",
      R"({"type":"urn:ietf:params:acme:error:badNonce"})",
      R"({"status":"valid","authorizations":[],"finalize":"f"})",
      R"({"status":"pending","authorizations":[1,2],"finalize":"f"})",
      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
      "",
      "{",
      "[]",
      "\xff\xfe{\"status\":\"valid\"}",
      R"({"newNonce":"\ud800","newAccount":"a","newOrder":"o"})",
  };
  const std::vector<std::string> odd = {"", "\xff\xfe\x80", "nonce\r\nX: y", std::string(3000, 'n'),
                                        "https://ca.test/\xc3\x28"};
  std::mt19937 rng(52);
  int done = 0, failed = 0;
  for (int round = 0; round < 3000; ++round) {
    OrderMachine m(options_, key_, cert_key_.get());
    Action a = m.start();
    int steps = 0;
    while (a.kind != Kind::kDone && a.kind != Kind::kFailed) {
      ASSERT_LT(++steps, 400) << "round " << round << " did not end";
      if (a.kind == Kind::kWait) {
        a = m.on_wait_over();
        continue;
      }
      if (a.kind == Kind::kProvision) {
        a = m.on_provisioned();
        continue;
      }
      Response r;
      static const int kStatuses[] = {200, 201, 204, 400, 403, 429, 500, 503, 0, 999};
      r.status = kStatuses[rng() % 10];
      r.body = bodies[rng() % bodies.size()];
      if (rng() % 4 != 0)
        r.headers.emplace_back("Replay-Nonce",
                               rng() % 3 ? "n" + std::to_string(rng()) : odd[rng() % odd.size()]);
      if (rng() % 3 == 0)
        r.headers.emplace_back("Location",
                               rng() % 2 ? "https://ca.test/x" : odd[rng() % odd.size()]);
      if (rng() % 4 == 0)
        r.headers.emplace_back("Retry-After", rng() % 2 ? "1" : odd[rng() % odd.size()]);
      if (rng() % 5 == 0) r.body = odd[rng() % odd.size()];
      a = m.on_response(r, 0);
    }
    (a.kind == Kind::kDone ? done : failed)++;
    EXPECT_TRUE(m.finished());
    if (a.kind == Kind::kFailed) {
      EXPECT_FALSE(a.error.empty());
    }
  }
  EXPECT_GT(failed, 0);
}

// The driver calling on_provisioned or on_wait_over out of turn gets a failure, not a crash.
TEST_F(AcmeOrderMachine, CallsOutOfTurnFail) {
  OrderMachine m(options_, key_, cert_key_.get());
  m.start();
  Action a = m.on_provisioned();
  EXPECT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.error, "challenge: no challenge is being answered");
  OrderMachine w(options_, key_, cert_key_.get());
  w.start();
  a = w.on_wait_over();
  EXPECT_EQ(a.kind, Kind::kFailed);
  EXPECT_EQ(a.error, "directory: the order is not waiting");
}

}  // namespace
}  // namespace peregrine::acme
