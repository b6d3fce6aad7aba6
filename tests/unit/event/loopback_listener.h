// A TCP listening socket on 127.0.0.1 at a port the kernel picks, for the poller tests that
// need real TCP connections (accepts, FIN after the first read).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace peregrine::event::test_support {

// Non-blocking; `address` gets its address. -1 if it cannot be made.
inline int listen_on_loopback(sockaddr_in* address) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  *address = sockaddr_in{};
  address->sin_family = AF_INET;
  address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof *address;
  if (bind(fd, reinterpret_cast<sockaddr*>(address), sizeof *address) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace peregrine::event::test_support
