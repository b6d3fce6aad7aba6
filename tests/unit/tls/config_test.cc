// Reading TLS keys: each error at its LINE:COL with its hint, warnings, and the values read.
#include "tls/config.h"

#include <gtest/gtest.h>

#include <string>

#include "unit/config/config_test_support.h"

namespace peregrine::tls {
namespace {

using config::test_support::describe;

class TlsConfigTest : public config::test_support::ConfigTest {
 protected:
  void SetUp() override {
    ConfigTest::SetUp();
    std::string fingerprint;
    config::TlsCertificate one, two;
    ASSERT_EQ(make_self_signed({"localhost"}, &one, &fingerprint), "");
    ASSERT_EQ(make_self_signed({"other.test"}, &two, &fingerprint), "");
    dir_.write("one.pem", one.chain_pem);
    dir_.write("one.key", one.key_pem);
    dir_.write("two.key", two.key_pem);
    dir_.write("garbage.pem", "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n");
    dir_.write("short.key", "0123456789");
    dir_.write("ticket.key", std::string(80, 'k'));
  }
};

TEST_F(TlsConfigTest, SiteCertificateIsReadIntoMemory) {
  auto config = load_ok(R"(listen = { address = "127.0.0.1:8443", tls = true }
[[site]]
root = "www"
tls = { certificate = "one.pem", key = "one.key", hsts = { max_age = "365d", preload = true } }
)");
  ASSERT_NE(config, nullptr);
  EXPECT_TRUE(config->listen[0].tls);
  ASSERT_EQ(config->sites[0].tls.certificates.size(), 1u);
  EXPECT_EQ(config->sites[0].tls.certificates[0].certificate_path, dir_.path("one.pem"));
  EXPECT_NE(config->sites[0].tls.certificates[0].chain_pem.find("BEGIN CERTIFICATE"),
            std::string::npos);
  EXPECT_EQ(config->sites[0].tls.hsts, "max-age=31536000; preload");
}

// Each mistake is reported at the key that holds it, with what to do about it.
TEST_F(TlsConfigTest, ErrorsAtTheirPositionWithHints) {
  struct Case {
    const char* what;
    const char* site_tls;  // the [[site]]'s tls = ... line (line 3), or a whole file
    std::string starts_with;
    std::string contains;
  };
  const Case cases[] = {
      {"missing file", R"(tls = { certificate = "nope.pem", key = "one.key" })",
       "3:23: cannot read site.tls.certificate 'nope.pem': No such file or dir", ""},
      {"key of another certificate", R"(tls = { certificate = "one.pem", key = "two.key" })",
       "3:40: the key does not match the certificate",
       "(hint: name the key file that belongs to '" + dir_.path("one.pem") + "')"},
      {"unreadable chain", R"(tls = { certificate = "garbage.pem", key = "one.key" })",
       "3:23: no certificate could be read from the chain file (bad ba",
       "(hint: the file holds the site's certificate first"},
      {"two certificates of one key type",
       "tls = { certificates = [{ certificate = \"one.pem\", key = \"one.key\" },\n"
       "                        { certificate = \"one.pem\", key = \"one.key\" }] }",
       "4:41: the site already has a certificate with a ECDSA key",
       "(hint: one certificate per key type (one ECDSA and one RSA at most))"},
  };
  for (const Case& c : cases) {
    std::string e = error(std::string("[[site]]\nroot = \"www\"\n") + c.site_tls + "\n");
    EXPECT_EQ(e.substr(0, c.starts_with.size()), c.starts_with) << c.what;
    EXPECT_NE(e.find(c.contains), std::string::npos) << c.what << ": " << e;
  }
  EXPECT_EQ(error(R"(listen = [{ address = "127.0.0.1:8443", tls = true }]
[[site]]
root = "www"
)"),
            "1:23: TLS listener '127.0.0.1:8443' but no site has a certificate (hint: add tls = { "
            "certificate = \"/etc/ssl/site.pem\", key = \"/etc/ssl/site.key\" } to a [[site]])");
}

TEST_F(TlsConfigTest, GlobalOptions) {
  auto config = load_ok(R"([tls]
protocols = ["TLSv1.3"]
ciphersuites = "TLS_AES_128_GCM_SHA256"
curves = "X25519"
ticket_key_files = ["ticket.key"]
session_cache = 0
access_log_tls = true
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_FALSE(config->tls.tls12);
  EXPECT_TRUE(config->tls.tls13);
  EXPECT_EQ(config->tls.ticket_keys.size(), 1u);
  EXPECT_EQ(config->tls.session_cache, 0u);
  EXPECT_TRUE(config->tls.log_tls);
}

TEST_F(TlsConfigTest, GlobalOptionErrors) {
  auto all = errors(R"([tls]
protocols = ["TLSv1.1"]
ticket_key_files = ["short.key"]
curves = "P-999"
sesion_cache = 1
[[site]]
root = "www"
)");
  ASSERT_EQ(all.size(), 4u) << ::testing::PrintToString(all);
  EXPECT_EQ(all[0].substr(0, 40), "2:14: unsupported TLS protocol \"TLSv1.1\"");
  EXPECT_EQ(all[1].substr(0, 20), "3:21: ticket key fil");
  EXPECT_NE(all[1].find("holds 10 bytes, not 80 (hint: make one with: openssl rand 80"),
            std::string::npos);
  EXPECT_EQ(all[2].substr(0, 40), "4:10: OpenSSL accepts none of tls.curves");
  EXPECT_NE(all[3].find("did you mean 'session_cache'"), std::string::npos) << all[3];
}

TEST(SelfSigned, FingerprintIsColonHex) {
  config::TlsCertificate certificate;
  std::string fingerprint;
  ASSERT_EQ(make_self_signed({"localhost", "127.0.0.1"}, &certificate, &fingerprint), "");
  EXPECT_EQ(fingerprint.size(), 32u * 3 - 1);
  std::string key_type;
  int days = 0;
  bool key_problem = false;
  EXPECT_EQ(
      check_certificate(certificate.chain_pem, certificate.key_pem, &key_type, &days, &key_problem),
      "");
  EXPECT_EQ(key_type, "ECDSA");
  EXPECT_GE(days, 364);
}

}  // namespace
}  // namespace peregrine::tls
