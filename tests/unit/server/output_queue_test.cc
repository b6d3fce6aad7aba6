#include "server/output_queue.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace peregrine::server {
namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(OutputQueue, BytesAndFileRegionsLeaveInOrder) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  char path[] = "/tmp/peregrine-oq-XXXXXX";
  int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  ASSERT_EQ(write(file, "0123456789", 10), 10);
  Ref<BodyFile> body(new BodyFile(file));

  OutputQueue q;
  q.append("head:");
  q.append_file(body, 2, 5);
  q.append(":tail");
  EXPECT_EQ(q.pending_bytes(), 15u);
  EXPECT_EQ(q.flush(pair[0]), OutputQueue::FlushResult::kDone);
  EXPECT_TRUE(q.empty());
  shutdown(pair[0], SHUT_WR);
  EXPECT_EQ(read_all(pair[1]), "head:23456:tail");
  close(pair[0]);
  close(pair[1]);
}

TEST(OutputQueue, BlockedRemainderMovesToAnotherQueue) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
  int small = 4096;
  setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);

  OutputQueue scratch;
  scratch.append(big);
  ASSERT_EQ(scratch.flush(pair[0]), OutputQueue::FlushResult::kBlocked);
  OutputQueue pending;
  pending.take_remainder(scratch);
  EXPECT_TRUE(scratch.empty());

  std::string received;
  char buf[65536];
  for (int rounds = 0; rounds < 100000 && received.size() < big.size(); ++rounds) {
    ssize_t n = ::read(pair[1], buf, sizeof buf);
    if (n > 0) received.append(buf, static_cast<size_t>(n));
    if (!pending.empty()) pending.flush(pair[0]);
  }
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(received, big);
  close(pair[0]);
  close(pair[1]);
}

}  // namespace
}  // namespace peregrine::server
