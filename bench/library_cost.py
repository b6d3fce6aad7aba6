#!/usr/bin/env python3
"""What an application handler costs (issue 20): "Hello world" from examples/hello's synchronous
handler, its callback-style and its coroutine asynchronous handlers, against the built-in
`return` route of the peregrine binary answering the same 11 bytes. Target: CPU per request at
most 1.05x the `return` route's.

    /usr/bin/python3 bench/library_cost.py [--requests 5000]

Counted rather than timed, as bench/metrics_cost.py --instructions does: each server runs under
callgrind with one worker (counters zeroed after a 500-request warm-up, dumped after the
measured `ab -k -c 8` run) for its user-space instructions per request. The four make the same
system calls per request (one read, one write on a kept-alive connection), so the kernel's part of
the CPU time is common to all, and a handler's CPU ratio to the `return` route is
1 + (instructions - return's) / return's x the user-space share of the `return` route's CPU time
(utime / (utime + stime) over a plain 200,000-request ab run).

Each handler is compared with the `return` route at the same path, in a route table of the same
shape as examples/hello's (/callback, /coroutine, then /): the request's bytes and the route
lookup are then the same, and only the handler path differs (a longer path and a later route
cost up to ~120 instructions by themselves).
"""

import argparse
import os
import sys
import tempfile

from counting import instructions_per_request, user_share

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEREGRINE = os.path.join(REPO, "build/release/peregrine")
HELLO = os.path.join(REPO, "build/release/hello")
RETURN_CONFIG = """listen = ["127.0.0.1:0"]
workers = 1
[[site]]
root = "{root}"
access_log = "off"
{routes}"""
RETURN_ROUTE = """[[site.route]]
prefix = "{prefix}"
return = 200
body = "Hello world"
"""
HELLO_ROUTES = ("/callback", "/coroutine", "/")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    opts = parser.parse_args()
    for binary in (PEREGRINE, HELLO):
        if not os.path.exists(binary):
            sys.exit(f"{binary} is missing: cmake --build --preset release")
    with tempfile.TemporaryDirectory(prefix="library-cost-") as workdir:
        config = os.path.join(workdir, "return.toml")
        with open(config, "w") as f:
            routes = "".join(RETURN_ROUTE.format(prefix=p) for p in HELLO_ROUTES)
            f.write(RETURN_CONFIG.format(root=workdir, routes=routes))
        builtin = [PEREGRINE, "-c", config]
        hello = [HELLO, "--listen", "127.0.0.1:0", "--workers", "1"]
        rows = [("library sync", "/"), ("library callback", "/callback"),
                ("library coroutine", "/coroutine")]
        share = user_share(builtin, "/", workdir)
        print(f"user-space share of the return route's CPU time: {share * 100:.0f} %")
        print(f"{'handler':18} {'path':11} {'instr/req':>10} {'return':>8} {'CPU vs return':>14}")
        for i, (name, path) in enumerate(rows):
            base = instructions_per_request(builtin, path, opts.requests, workdir, f"return{i}")
            n = instructions_per_request(hello, path, opts.requests, workdir, f"hello{i}")
            print(f"{name:18} {path:11} {n:>10.0f} {base:>8.0f} "
                  f"{1 + (n - base) / base * share:>13.3f}x", flush=True)

if __name__ == "__main__":
    main()
