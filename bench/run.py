#!/usr/bin/env python3
"""Side-by-side benchmark: Peregrine vs nginx, H2O and lighttpd.

Not a pass/fail test: it prints figures (and optionally writes JSON).  See bench/README.md.

Method (details and caveats: bench/README.md, "Method"; the figures: docs/performance.md):
  * every server: one worker, loopback, ephemeral port, generated config in a temp dir,
    pinned to CPU 0 (taskset -c 0); the load generator (wrk -t1) pinned to CPU 1;
  * per scenario and server: one 2 s warm-up, then N runs of --duration seconds, the servers'
    runs interleaved (run 1 of every server, then run 2, ...) so background noise hits all alike;
  * per run: requests/s, requests completed, errors, p99, and the server's CPU time per
    request, summed over all its processes and threads (schedstat, ns resolution; the
    utime+stime from /proc/PID/stat at CLK_TCK resolution is recorded alongside);
  * idle10k: RSS growth of the server with 10,000 idle keep-alive connections.

The code is the package bench/peregrine_bench/: scenarios, servers (one class per server),
backends (php-fpm, the back-end nginx), load (wrk, ab, the idle10k client), measure (/proc),
report (tables, medians) and driver (the command line and the run).

python3 stdlib only.  Only 127.0.0.1 is ever targeted.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peregrine_bench.driver import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
