// Whether this kernel has io_uring's batch wait (IORING_FEAT_MIN_TIMEOUT, Linux 6.12), for the
// tests of the batch wait to skip where the ring cannot hold.
#pragma once

#include <sys/utsname.h>

#include <cstdio>

namespace peregrine::event::test_support {

inline bool kernel_has_min_timeout() {
  utsname name{};
  int major = 0, minor = 0;
  return uname(&name) == 0 && std::sscanf(name.release, "%d.%d", &major, &minor) == 2 &&
         (major > 6 || (major == 6 && minor >= 12));
}

}  // namespace peregrine::event::test_support
