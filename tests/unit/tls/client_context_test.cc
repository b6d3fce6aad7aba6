// tls::ClientContext (tls/client_context.h): what a back-end connection verifies (chain, name,
// IP address), what it sends (SNI), the file errors, and session resumption through a
// SessionCache. A server session on the other end of a socket pair plays the back end.
#include "tls/client_context.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "unit/tls/client_test_pki.h"

namespace peregrine::tls {
namespace {

using test::TestPki;

class TempFiles {
 public:
  TempFiles() {
    char pattern[] = "/tmp/peregrine-tls-client-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  ~TempFiles() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const char* name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

struct Pair {
  int fds[2] = {-1, -1};
  Pair() { socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds); }
  ~Pair() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
};

// The server's name as the client sent it (SNI), or "" when none came.
int record_sni(SSL* ssl, int*, void* arg) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  *static_cast<std::string*>(arg) = name ? name : "";
  return SSL_TLSEXT_ERR_OK;
}

class ClientContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.write_ca(files_.path("ca.pem")));
    server_ = pki_.server_context();
    SSL_CTX_set_tlsext_servername_callback(server_, record_sni);
    SSL_CTX_set_tlsext_servername_arg(server_, &sni_);
  }
  void TearDown() override { SSL_CTX_free(server_); }

  std::unique_ptr<ClientContext> context(ClientOptions options) {
    std::string error;
    auto made = ClientContext::make(options, &error);
    EXPECT_TRUE(made) << error;
    return made;
  }
  ClientOptions trusting() const {
    ClientOptions options;
    options.ca_file = files_.path("ca.pem");
    return options;
  }

  // Connects a client of `client` for `name` to the test server; drives both handshakes. On
  // success, one byte goes from the server to the client (TLS 1.3 tickets arrive before it).
  Stream::Progress connect(const ClientContext& client, const std::string& name,
                           SessionCache* cache = nullptr, std::string* reason = nullptr,
                           bool* resumed = nullptr) {
    Pair pair;
    auto server = Stream::make(server_, pair.fds[0], Stream::Role::kServer);
    auto stream = client.open(pair.fds[1], name, cache);
    EXPECT_TRUE(server && stream);
    if (!server || !stream) return Stream::Progress::kFailed;
    for (int i = 0; i < 20; ++i) {
      Stream::Progress c = stream->handshake();
      Stream::Progress s = server->handshake();
      if (c == Stream::Progress::kFailed) {
        if (reason) *reason = ClientContext::failure_reason(*stream);
        return c;
      }
      if (s == Stream::Progress::kFailed) {
        // The server gave up (it read the client's alert): ask the client why.
        if (stream->handshake() == Stream::Progress::kFailed && reason)
          *reason = ClientContext::failure_reason(*stream);
        return Stream::Progress::kFailed;
      }
      if (c == Stream::Progress::kDone && s == Stream::Progress::kDone) {
        EXPECT_EQ(server->write("x", 1), 1);
        char byte = 0;
        EXPECT_EQ(stream->read(&byte, 1), 1);
        EXPECT_EQ(stream->alpn(), "");  // the server offers no ALPN: none is forced
        if (resumed) *resumed = stream->resumed();
        // A clean end keeps the session resumable.
        stream->shutdown();
        return c;
      }
    }
    return Stream::Progress::kWantIo;
  }

  TempFiles files_;
  TestPki pki_;
  SSL_CTX* server_ = nullptr;
  std::string sni_ = "(none)";
};

TEST_F(ClientContextTest, VerifiesTheChainAndTheNameAndSendsItAsSni) {
  auto client = context(trusting());
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->verifies());
  EXPECT_EQ(connect(*client, "localhost"), Stream::Progress::kDone);
  EXPECT_EQ(sni_, "localhost");
}

TEST_F(ClientContextTest, VerifiesAnIpAddressWithoutSni) {
  auto client = context(trusting());
  ASSERT_TRUE(client);
  EXPECT_EQ(connect(*client, "127.0.0.1"), Stream::Progress::kDone);
  EXPECT_EQ(sni_, "");  // RFC 6066: SNI carries host names only
}

TEST_F(ClientContextTest, AnotherNameFailsWithHostnameMismatch) {
  auto client = context(trusting());
  ASSERT_TRUE(client);
  std::string reason;
  EXPECT_EQ(connect(*client, "api.example.com", nullptr, &reason), Stream::Progress::kFailed);
  EXPECT_NE(reason.find("certificate verify failed"), std::string::npos) << reason;
  EXPECT_NE(reason.find("hostname mismatch"), std::string::npos) << reason;
  std::string ip_reason;
  EXPECT_EQ(connect(*client, "127.0.0.2", nullptr, &ip_reason), Stream::Progress::kFailed);
  EXPECT_NE(ip_reason.find("IP address mismatch"), std::string::npos) << ip_reason;
}

TEST_F(ClientContextTest, AnUnknownIssuerFails) {
  TestPki other("another CA");
  ASSERT_TRUE(other.write_ca(files_.path("other.pem")));
  ClientOptions options;
  options.ca_file = files_.path("other.pem");
  auto client = context(options);
  ASSERT_TRUE(client);
  std::string reason;
  EXPECT_EQ(connect(*client, "localhost", nullptr, &reason), Stream::Progress::kFailed);
  EXPECT_NE(reason.find("unable to get local issuer certificate"), std::string::npos) << reason;

  // The system store does not know the test CA either.
  auto system = context(ClientOptions{});
  ASSERT_TRUE(system);
  EXPECT_EQ(connect(*system, "localhost"), Stream::Progress::kFailed);
}

TEST_F(ClientContextTest, VerificationOffAcceptsAnyCertificateAndName) {
  ClientOptions options;
  options.verify = false;
  auto client = context(options);
  ASSERT_TRUE(client);
  EXPECT_FALSE(client->verifies());
  EXPECT_EQ(connect(*client, "api.example.com"), Stream::Progress::kDone);
  EXPECT_EQ(sni_, "api.example.com");  // SNI still names the server
}

TEST_F(ClientContextTest, TheNextConnectionResumesTheCachedSession) {
  auto client = context(trusting());
  ASSERT_TRUE(client);
  SessionCache cache;
  bool resumed = true;
  ASSERT_EQ(connect(*client, "localhost", &cache, nullptr, &resumed), Stream::Progress::kDone);
  EXPECT_FALSE(resumed);
  ASSERT_NE(cache.get(), nullptr) << "the server's session ticket was kept";
  ASSERT_EQ(connect(*client, "localhost", &cache, nullptr, &resumed), Stream::Progress::kDone);
  EXPECT_TRUE(resumed);
  cache.clear();
  ASSERT_EQ(connect(*client, "localhost", nullptr, nullptr, &resumed), Stream::Progress::kDone);
  EXPECT_FALSE(resumed) << "no cache, no resumption";
}

TEST_F(ClientContextTest, FileErrorsSayWhichFileAndWhy) {
  std::string error;
  ClientOptions missing;
  missing.ca_file = files_.path("nope.pem");
  EXPECT_EQ(ClientContext::make(missing, &error), nullptr);
  EXPECT_EQ(error, "cannot read the CA file '" + missing.ca_file + "': No such file or directory");

  std::ofstream(files_.path("junk.pem")) << "not a certificate\n";
  ClientOptions junk;
  junk.ca_file = files_.path("junk.pem");
  EXPECT_EQ(ClientContext::make(junk, &error), nullptr);
  EXPECT_EQ(error.rfind("the CA file '" + junk.ca_file + "' holds no usable PEM certificate", 0),
            0u)
      << error;

  // A client certificate with a key that is not its own.
  TestPki other("another CA");
  ASSERT_TRUE(pki_.write_server_cert(files_.path("client.pem")));
  ASSERT_TRUE(other.write_server_key(files_.path("other.key")));
  ClientOptions mismatched = trusting();
  mismatched.certificate = files_.path("client.pem");
  mismatched.key = files_.path("other.key");
  EXPECT_EQ(ClientContext::make(mismatched, &error), nullptr);
  EXPECT_EQ(error, "the client key '" + mismatched.key + "' does not match the certificate '" +
                       mismatched.certificate + "'");

  ASSERT_TRUE(pki_.write_server_key(files_.path("client.key")));
  ClientOptions matching = mismatched;
  matching.key = files_.path("client.key");
  EXPECT_NE(ClientContext::make(matching, &error), nullptr) << error;
}

TEST_F(ClientContextTest, ClientCertificateIsPresentedWhenTheServerAsks) {
  ASSERT_TRUE(pki_.write_server_cert(files_.path("client.pem")));
  ASSERT_TRUE(pki_.write_server_key(files_.path("client.key")));
  // The server trusts the test CA for clients and requires a certificate.
  X509_STORE* store = SSL_CTX_get_cert_store(server_);
  ASSERT_EQ(X509_STORE_load_file(store, files_.path("ca.pem").c_str()), 1);
  SSL_CTX_set_verify(server_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);

  auto anonymous = context(trusting());
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(connect(*anonymous, "localhost"), Stream::Progress::kFailed);

  ClientOptions options = trusting();
  options.certificate = files_.path("client.pem");
  options.key = files_.path("client.key");
  auto client = context(options);
  ASSERT_TRUE(client);
  EXPECT_EQ(connect(*client, "localhost"), Stream::Progress::kDone);
}

}  // namespace
}  // namespace peregrine::tls
