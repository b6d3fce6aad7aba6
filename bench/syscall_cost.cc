// What a system call costs on this machine, against what the ring costs per operation: the
// most the io_uring backend can save over epoll (issue 19) is the entry and exit of the
// `recv` and `send` it replaces per request, less what it spends on its own operations.
// Not a benchmark of Peregrine: a yardstick for docs/io_uring.md.
//
//   cmake --build --preset release --target syscall-cost
//   taskset -c 0 build/release/syscall-cost [ITERATIONS]   # default 2,000,000
//
// Prints, in ns, the median of five rounds of each:
//   bare       a system call that does nothing (getppid): entry, exit and their mitigations
//   recv       recv(2) on an empty non-blocking socket (EAGAIN): plus finding the socket
//   ring x1    io_uring_enter that submits one NOP and waits for its completion
//   ring x64   the same with 64 NOPs per enter, per NOP: the ring's own cost per operation
#include <liburing.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Nanoseconds per operation of `body`, which performs `operations` of them.
template <typename Body>
double median_ns(long operations, Body body) {
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    body();
    std::chrono::duration<double, std::nano> spent = std::chrono::steady_clock::now() - start;
    rounds.push_back(spent.count() / static_cast<double>(operations));
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

// `iterations` NOPs, `per_enter` to each io_uring_enter; false if the ring fails.
bool run_nops(io_uring& ring, long iterations, unsigned per_enter) {
  for (long done = 0; done < iterations; done += per_enter) {
    for (unsigned i = 0; i < per_enter; ++i) io_uring_prep_nop(io_uring_get_sqe(&ring));
    if (io_uring_submit_and_wait(&ring, per_enter) < 0) return false;
    io_uring_cq_advance(&ring, per_enter);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 2'000'000;
  if (iterations < 64) {
    std::fprintf(stderr, "usage: %s [ITERATIONS >= 64]\n", argv[0]);
    return 2;
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair) != 0) return 1;
  io_uring ring;
  if (io_uring_queue_init(128, &ring, 0) != 0) {
    std::fprintf(stderr, "io_uring_queue_init failed\n");
    return 1;
  }
  bool ring_ok = true;
  const double bare = median_ns(iterations, [&] {
    for (long i = 0; i < iterations; ++i) syscall(SYS_getppid);
  });
  const double receive = median_ns(iterations, [&] {
    char byte;
    for (long i = 0; i < iterations; ++i) (void)!recv(pair[0], &byte, 1, 0);
  });
  const double ring_one = median_ns(iterations, [&] { ring_ok &= run_nops(ring, iterations, 1); });
  const long batched = iterations / 64 * 64;
  const double ring_batch = median_ns(batched, [&] { ring_ok &= run_nops(ring, batched, 64); });
  if (!ring_ok) {
    std::fprintf(stderr, "io_uring_submit_and_wait failed\n");
    return 1;
  }
  std::printf("bare %.1f ns\nrecv %.1f ns\nring x1 %.1f ns\nring x64 %.1f ns\n", bare, receive,
              ring_one, ring_batch);
  io_uring_queue_exit(&ring);
  return 0;
}
