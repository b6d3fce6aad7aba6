#include "tls/stream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace peregrine::tls {
namespace {

// A self-signed P-256 certificate for `key`, named `common_name`.
X509* self_signed(EVP_PKEY* key, const char* common_name) {
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  return cert;
}

// A server context with an in-memory self-signed certificate, and a client context that
// trusts anything (the test is about the session plumbing, not about verification).
struct Contexts {
  SSL_CTX* server = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client = SSL_CTX_new(TLS_client_method());
  Contexts() {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = self_signed(key, "localhost");
    SSL_CTX_use_certificate(server, cert);
    SSL_CTX_use_PrivateKey(server, key);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  ~Contexts() {
    SSL_CTX_free(server);
    SSL_CTX_free(client);
  }
};

struct Pair {
  int fds[2] = {-1, -1};
  Pair() { socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds); }
  ~Pair() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
};

// Drives both handshakes in turn until both are done (no poller: the pair is non-blocking).
bool handshake(Stream& a, Stream& b) {
  for (int i = 0; i < 20; ++i) {
    Stream::Progress pa = a.handshake(), pb = b.handshake();
    if (pa == Stream::Progress::kFailed || pb == Stream::Progress::kFailed) return false;
    if (pa == Stream::Progress::kDone && pb == Stream::Progress::kDone) return true;
  }
  return false;
}

TEST(TlsStream, HandshakeThenBytesBothWaysThenCloseNotifyReadsAsZero) {
  Contexts contexts;
  Pair pair;
  auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
  auto client = Stream::make(contexts.client, pair.fds[1], Stream::Role::kClient);
  ASSERT_TRUE(server && client);
  char buffer[64];
  errno = 0;
  EXPECT_EQ(server->read(buffer, sizeof buffer), -1);  // nothing yet: would block
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_TRUE(handshake(*server, *client)) << server->error() << client->error();
  EXPECT_EQ(server->version(), "TLSv1.3");
  EXPECT_FALSE(server->cipher().empty());
  EXPECT_EQ(server->alpn(), "");

  ASSERT_EQ(client->write("GET / HTTP/1.1\r\n", 16), 16);
  ASSERT_EQ(server->read(buffer, sizeof buffer), 16);
  EXPECT_EQ(std::string(buffer, 16), "GET / HTTP/1.1\r\n");
  errno = 0;
  EXPECT_EQ(server->read(buffer, sizeof buffer), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(server->write("ok", 2), 2);
  ASSERT_EQ(client->read(buffer, sizeof buffer), 2);

  client->shutdown();
  EXPECT_EQ(server->read(buffer, sizeof buffer), 0);
}

TEST(TlsStream, BareEofReadsAsZeroAndGarbageFailsTheHandshakeWithAReason) {
  Contexts contexts;
  {
    Pair pair;
    auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
    auto client = Stream::make(contexts.client, pair.fds[1], Stream::Role::kClient);
    ASSERT_TRUE(handshake(*server, *client));
    close(pair.fds[1]);
    pair.fds[1] = -1;
    char buffer[16];
    ssize_t n = server->read(buffer, sizeof buffer);
    EXPECT_TRUE(n == 0 || (n == -1 && errno != EAGAIN)) << n;
  }
  {
    Pair pair;
    auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
    ASSERT_EQ(write(pair.fds[1], "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 27);
    EXPECT_EQ(server->handshake(), Stream::Progress::kFailed);
    EXPECT_NE(server->error().find("handshake"), std::string::npos) << server->error();
    EXPECT_EQ(ERR_peek_error(), 0u);  // nothing left behind for the next connection
  }
}

// The server ignores SIGPIPE as it starts, but a stream should not depend on that: with SIGPIPE
// at its default, which ends the process, a write to a peer that has gone must come back as an
// error (the stream sends with MSG_NOSIGNAL).
TEST(TlsStream, AWriteToAClosedPeerFailsWithoutSigpipe) {
  Contexts contexts;
  Pair pair;
  auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
  auto client = Stream::make(contexts.client, pair.fds[1], Stream::Role::kClient);
  ASSERT_TRUE(handshake(*server, *client));
  EXPECT_FALSE(server->kernel_send());  // no kTLS on a Unix socket
  client.reset();
  close(pair.fds[1]);
  pair.fds[1] = -1;
  struct sigaction default_action = {}, saved = {};
  default_action.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &default_action, &saved), 0);
  errno = 0;
  const ssize_t written = server->write("late", 4);
  const int error = errno;
  sigaction(SIGPIPE, &saved, nullptr);
  EXPECT_EQ(written, -1);
  EXPECT_EQ(error, EPIPE) << server->error();
  EXPECT_NE(server->error().find("write"), std::string::npos);
}

// The thread's error queue is shared by every connection on it: an error another connection (or
// any OpenSSL call) left there must not turn this one's "would block" into a failure.
TEST(TlsStream, AnErrorLeftOnTheThreadDoesNotFailTheNextRead) {
  Contexts contexts;
  Pair pair;
  auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
  auto client = Stream::make(contexts.client, pair.fds[1], Stream::Role::kClient);
  ASSERT_TRUE(handshake(*server, *client));
  ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET);
  char buffer[16];
  errno = 0;
  EXPECT_EQ(server->read(buffer, sizeof buffer), -1);
  EXPECT_EQ(errno, EAGAIN) << server->error();
  EXPECT_EQ(ERR_peek_error(), 0u);
  ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET);
  ASSERT_EQ(client->write("ping", 4), 4);
  ASSERT_EQ(server->read(buffer, sizeof buffer), 4);
  ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET);
  EXPECT_EQ(server->write("pong", 4), 4);
  EXPECT_EQ(client->read(buffer, sizeof buffer), 4);
}

// A client's certificate and key.
struct ClientIdentity {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = self_signed(key, "client");
  ~ClientIdentity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

TEST(TlsStream, SessionFactsMatchWhatTheClientNegotiated) {
  // TLS 1.2 without tickets: the ServerHello names the session, so both ends know its id.
  Contexts contexts;
  Pair pair;
  auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
  auto client = Stream::make(contexts.client, pair.fds[1], Stream::Role::kClient);
  SSL_set_max_proto_version(client->ssl(), TLS1_2_VERSION);
  SSL_set_options(client->ssl(), SSL_OP_NO_TICKET);
  SSL_set_cipher_list(client->ssl(), "ECDHE+AESGCM+AES128");
  ASSERT_TRUE(handshake(*server, *client));
  EXPECT_EQ(server->version(), "TLSv1.2");
  EXPECT_EQ(server->cipher(), client->cipher());
  EXPECT_EQ(server->cipher_bits(), 128);
  unsigned int length = 0;
  const unsigned char* id = SSL_SESSION_get_id(SSL_get0_session(client->ssl()), &length);
  ASSERT_GT(length, 0u);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    char two[3];
    snprintf(two, sizeof two, "%02X", id[i]);
    hex += two;
  }
  EXPECT_EQ(server->session_id_hex(), hex);
  EXPECT_EQ(server->client_certificate_pem(), "");  // none asked for, none sent
}

TEST(TlsStream, ClientCertificateComesBackAsPem) {
  Contexts contexts;
  ClientIdentity identity;
  Pair pair;
  auto server = Stream::make(contexts.server, pair.fds[0], Stream::Role::kServer);
  auto client = Stream::make(contexts.client, pair.fds[1], Stream::Role::kClient);
  // Ask for a certificate and take any: the test is about passing it on, not verifying it.
  SSL_set_verify(server->ssl(), SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
  SSL_use_certificate(client->ssl(), identity.cert);
  SSL_use_PrivateKey(client->ssl(), identity.key);
  ASSERT_TRUE(handshake(*server, *client)) << server->error() << client->error();
  const std::string pem = server->client_certificate_pem();
  ASSERT_EQ(pem.rfind("-----BEGIN CERTIFICATE-----\n", 0), 0u) << pem;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* parsed = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(X509_cmp(parsed, identity.cert), 0);
  X509_free(parsed);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

}  // namespace
}  // namespace peregrine::tls
