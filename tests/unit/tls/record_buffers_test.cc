#include "tls/record_buffers.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "client_test_pki.h"
#include "core/spares.h"
#include "tls/stream.h"

namespace peregrine::tls {
namespace {

// Fails the child process with a line the death test shows.
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "record buffers: %s\n", what);
  std::exit(1);
}

// Runs in a fresh process: keep_record_buffers() has to come before OpenSSL's first allocation.
// Then 200 request-and-answer exchanges over a socket pair, with the buffers released after each
// record as the server's contexts release them.
void exchange_with_kept_buffers() {
  if (keep_record_buffers() != kRecycleAllocations) fail("not installed in a fresh process");
  test::TestPki pki;
  SSL_CTX* server_context = pki.server_context();
  SSL_CTX* client_context = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_mode(server_context, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_mode(client_context, SSL_MODE_RELEASE_BUFFERS);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) fail("socketpair");
  auto server = Stream::make(server_context, fds[0], Stream::Role::kServer);
  auto client = Stream::make(client_context, fds[1], Stream::Role::kClient);
  bool done = false;
  for (int i = 0; i < 20 && !done; ++i) {
    const Stream::Progress c = client->handshake(), s = server->handshake();
    if (c == Stream::Progress::kFailed || s == Stream::Progress::kFailed) fail("handshake");
    done = c == Stream::Progress::kDone && s == Stream::Progress::kDone;
  }
  if (!done) fail("handshake unfinished");
  // Small records, and full 16 KB ones (the largest a record buffer has to hold).
  static char buffer[16384];
  for (int round = 0; round < 200; ++round) {
    const size_t size = round % 2 == 0 ? 1000 : sizeof buffer;
    const std::string request(size, static_cast<char>('a' + round % 26));
    if (client->write(request.data(), size) != static_cast<ssize_t>(size)) fail("client write");
    if (server->read(buffer, size) != static_cast<ssize_t>(size) ||
        std::string(buffer, size) != request)
      fail("the server read other bytes than were sent");
    if (server->write(buffer, size) != static_cast<ssize_t>(size)) fail("server write");
    if (client->read(buffer, size) != static_cast<ssize_t>(size) ||
        std::string(buffer, size) != request)
      fail("the client read other bytes than were sent");
  }
  // Both ends' buffers went back to the thread, within its bound.
  const size_t kept = record_buffers_kept();
  if (kRecycleAllocations && (kept < 1 || kept > 8)) fail("kept outside 1..8 blocks");
  server.reset();
  client.reset();
  SSL_CTX_free(server_context);
  SSL_CTX_free(client_context);
  close(fds[0]);
  close(fds[1]);
  std::exit(0);
}

TEST(TlsRecordBuffersDeathTest, KeptBlocksCarryEveryByteAndStayBounded) {
  // "threadsafe" re-executes the test binary for this case alone: no OpenSSL call has run yet.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exchange_with_kept_buffers(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace peregrine::tls
