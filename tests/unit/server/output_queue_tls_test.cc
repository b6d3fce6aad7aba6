// OutputQueue over TLS: bytes and file regions (the pread fallback, no kTLS here) arrive whole
// and in order through a socket that keeps refusing, with the retries OpenSSL requires, and
// across the move of the blocked remainder into another queue (as a connection does).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "server/output_queue.h"
#include "tls/config.h"
#include "tls/server_context.h"

namespace peregrine::server {
namespace {

TEST(OutputQueueTls, FileRegionsThroughABlockingSocketArriveWhole) {
  auto config = std::make_shared<config::Config>();
  config->listen.resize(1);
  config->listen[0].tls = true;
  config->sites.resize(1);
  std::string fingerprint;
  config::TlsCertificate certificate;
  ASSERT_EQ(tls::make_self_signed({"localhost"}, &certificate, &fingerprint), "");
  config->sites[0].tls.certificates = {certificate};
  std::string error;
  auto contexts = tls::ServerContexts::build(config, &error);
  ASSERT_NE(contexts, nullptr) << error;

  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  int small = 4096;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  auto server = contexts->accept(fds[0], false);
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  auto client = tls::Stream::make(client_ctx, fds[1], tls::Stream::Role::kClient);
  for (int i = 0; i < 100 && !(server->handshake_done() && client->handshake_done()); ++i) {
    client->handshake();
    server->handshake();
  }
  ASSERT_TRUE(server->handshake_done() && client->handshake_done());

  char path[] = "/tmp/peregrine-oq-tls-XXXXXX";
  int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  std::string content(300 * 1000 + 7, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(rand());
  ASSERT_EQ(write(file, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  Ref<BodyFile> body(new BodyFile(file));

  OutputQueue scratch;
  std::string head(100, 'H'), big_head(40000, 'G');
  scratch.append(head);  // a short head shares the file's first record
  scratch.append_file(body, 5, 200000);
  scratch.append(big_head);  // a long one goes out on its own
  scratch.append_file(body, 0, content.size());
  scratch.append(":end");
  const std::string expected =
      head + content.substr(5, 200000) + big_head + content + std::string(":end");

  std::string received;
  OutputQueue pending;
  OutputQueue* queue = &scratch;
  for (int round = 0; round < 100000; ++round) {
    OutputQueue::FlushResult result = queue->flush(fds[0], server.get());
    ASSERT_NE(result, OutputQueue::FlushResult::kError) << server->error();
    if (result == OutputQueue::FlushResult::kBlocked && queue == &scratch) {
      pending.take_remainder(scratch);  // what Connection::flush does on the first refusal
      queue = &pending;
    }
    char buffer[3000];  // the client reads a little at a time
    ssize_t n = client->read(buffer, sizeof buffer);
    if (n > 0) received.append(buffer, static_cast<size_t>(n));
    if (result == OutputQueue::FlushResult::kDone) {
      while ((n = client->read(buffer, sizeof buffer)) > 0)
        received.append(buffer, static_cast<size_t>(n));
      break;
    }
  }
  EXPECT_EQ(queue, &pending) << "the socket never refused: the test did not test retries";
  ASSERT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected);

  client.reset();
  server.reset();
  SSL_CTX_free(client_ctx);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace peregrine::server
