// The pure parts of the server's TLS contexts (ALPN choice, SNI choice, ticket key files), and
// a real handshake over a socket pair for SNI with two sites.
#include "tls/server_context.h"

#include <gtest/gtest.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tls/config.h"

namespace peregrine::tls {
namespace {

std::vector<unsigned char> wire(std::initializer_list<std::string_view> names) {
  std::vector<unsigned char> out;
  for (std::string_view name : names) {
    out.push_back(static_cast<unsigned char>(name.size()));
    out.insert(out.end(), name.begin(), name.end());
  }
  return out;
}

TEST(SelectAlpn, Http11WhenOffered) {
  auto list = wire({"h2", "http/1.1"});
  EXPECT_EQ(select_alpn(list, false), "http/1.1");
  auto only_h2 = wire({"h2"});
  EXPECT_EQ(select_alpn(only_h2, false), "");
  auto other = wire({"spdy/3", "http/1.0"});
  EXPECT_EQ(select_alpn(other, true), "");
}

TEST(SelectAlpn, H2WinsOnlyWhenTheListenerOffersIt) {
  auto list = wire({"http/1.1", "h2"});
  EXPECT_EQ(select_alpn(list, true), "h2");
  EXPECT_EQ(select_alpn(list, false), "http/1.1");
}

TEST(SelectAlpn, MalformedListNegotiatesNothing) {
  std::vector<unsigned char> bad = {8, 'h', 't', 't', 'p'};
  EXPECT_EQ(select_alpn(bad, true), "");
  EXPECT_EQ(select_alpn({}, true), "");
}

config::Config three_sites() {
  config::Config config;
  config.sites.resize(3);
  config.sites[0].hosts = {"a.test"};
  config.sites[1].hosts = {"*.wild.test", "exact.wild.test.example"};
  config.sites[2].hosts = {"c.test"};  // no certificate
  config.sites[2].is_default = true;
  config.default_site = 2;
  return config;
}

TEST(PickContext, ExactThenWildcardElseFallback) {
  config::Config config = three_sites();
  std::vector<int> site_context = {0, 1, -1};
  const size_t fallback = 0;
  EXPECT_EQ(pick_context(config, site_context, fallback, "a.test"), 0u);
  EXPECT_EQ(pick_context(config, site_context, fallback, "A.TEST"), 0u);
  EXPECT_EQ(pick_context(config, site_context, fallback, "x.wild.test"), 1u);
  EXPECT_EQ(pick_context(config, site_context, fallback, "wild.test"), fallback);
  // A site without a certificate, an unknown name, no SNI: the default certificate.
  EXPECT_EQ(pick_context(config, site_context, 1, "c.test"), 1u);
  EXPECT_EQ(pick_context(config, site_context, 1, "nobody.test"), 1u);
  EXPECT_EQ(pick_context(config, site_context, 1, ""), 1u);
}

TEST(ServerNameOf, TheHostNameOfTheExtension) {
  const std::vector<unsigned char> good = {0, 9, 0, 0, 6, 'a', '.', 't', 'e', 's', 't'};
  EXPECT_EQ(server_name_of(good), "a.test");
  std::vector<unsigned char> bad = good;
  bad[1] = 10;  // the list length disagrees with the extension's
  EXPECT_EQ(server_name_of(bad), "");
  bad = good;
  bad[2] = 1;  // not a host name
  EXPECT_EQ(server_name_of(bad), "");
  bad = good;
  bad[4] = 7;  // the name runs past the end
  EXPECT_EQ(server_name_of(bad), "");
  EXPECT_EQ(server_name_of({}), "");
}

TEST(ClientCertificateStatus, AsNginxAnswers) {
  using V = config::SiteTls::VerifyClient;
  // mode, same context, presented, verified
  EXPECT_EQ(client_certificate_status(V::kOff, false, false, false), 0);
  EXPECT_EQ(client_certificate_status(V::kOn, true, true, true), 0);
  EXPECT_EQ(client_certificate_status(V::kOn, true, false, false), 400);
  EXPECT_EQ(client_certificate_status(V::kOn, true, true, false), 400);
  EXPECT_EQ(client_certificate_status(V::kOn, false, true, true), 421);
  EXPECT_EQ(client_certificate_status(V::kOptional, true, false, false), 0);
  EXPECT_EQ(client_certificate_status(V::kOptional, true, true, false), 400);
  EXPECT_EQ(client_certificate_status(V::kOptional, false, false, false), 421);
  EXPECT_EQ(client_certificate_status(V::kOptionalNoCa, true, true, false), 0);
  EXPECT_EQ(client_certificate_status(V::kOptionalNoCa, false, true, false), 421);
}

TEST(TicketKey, EightyBytesSplitIntoNameHmacAndAes) {
  std::string bytes(80, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i);
  TicketKey key;
  ASSERT_TRUE(parse_ticket_key(bytes, &key));
  EXPECT_EQ(key.name[0], 0);
  EXPECT_EQ(key.name[15], 15);
  EXPECT_EQ(key.hmac[0], 16);
  EXPECT_EQ(key.aes[0], 48);
  EXPECT_EQ(key.aes[31], 79);
  EXPECT_FALSE(parse_ticket_key(bytes.substr(0, 48), &key));
  EXPECT_FALSE(parse_ticket_key(bytes + "x", &key));
}

// A client handshake with `server_name` against contexts for two sites; the leaf's CN.
std::string handshake_subject(const ServerContexts& contexts, const char* server_name) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return "socketpair";
  auto server = contexts.accept(fds[0], false);
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  auto client = Stream::make(client_ctx, fds[1], Stream::Role::kClient);
  if (server_name) SSL_set_tlsext_host_name(client->ssl(), server_name);
  for (int i = 0; i < 100 && !(server->handshake_done() && client->handshake_done()); ++i) {
    client->handshake();
    server->handshake();
  }
  std::string subject;
  if (X509* peer = SSL_get1_peer_certificate(client->ssl())) {
    char name[256];
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, name, sizeof name);
    subject = name;
    X509_free(peer);
  }
  client.reset();
  server.reset();
  SSL_CTX_free(client_ctx);
  close(fds[0]);
  close(fds[1]);
  return subject;
}

TEST(ServerContexts, NoTlsListenerNoContexts) {
  auto config = std::make_shared<config::Config>(three_sites());
  config->listen.resize(1);
  std::string error;
  EXPECT_EQ(ServerContexts::build(config, &error), nullptr);
  EXPECT_EQ(error, "");
}

TEST(ServerContexts, SniChoosesTheSiteCertificateInARealHandshake) {
  auto config = std::make_shared<config::Config>(three_sites());
  config->listen.resize(1);
  config->listen[0].tls = true;
  std::string fingerprint;
  config::TlsCertificate a, wild;
  ASSERT_EQ(make_self_signed({"a.test"}, &a, &fingerprint), "");
  ASSERT_EQ(make_self_signed({"any.wild.test"}, &wild, &fingerprint), "");
  config->sites[0].tls.certificates = {a};
  config->sites[1].tls.certificates = {wild};
  std::string error;
  auto contexts = ServerContexts::build(config, &error);
  ASSERT_NE(contexts, nullptr) << error;
  EXPECT_EQ(handshake_subject(*contexts, "a.test"), "a.test");
  EXPECT_EQ(handshake_subject(*contexts, "x.wild.test"), "any.wild.test");
  // The default site (c.test) has none: the first site's certificate stands in.
  EXPECT_EQ(handshake_subject(*contexts, "c.test"), "a.test");
  EXPECT_EQ(handshake_subject(*contexts, nullptr), "a.test");
}

}  // namespace
}  // namespace peregrine::tls
