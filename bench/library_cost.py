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
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEREGRINE = os.path.join(REPO, "build/release/peregrine")
HELLO = os.path.join(REPO, "build/release/hello")
LISTEN_RE = re.compile(rb"\] listening on 127\.0\.0\.1:(\d+)")
RETURN_CONFIG = """listen = ["127.0.0.1:0"]
workers = 1
[[site]]
root = "{root}"
access_log = "off"
[[site.route]]
prefix = "/"
return = 200
body = "Hello world"
"""


class Server:
    def __init__(self, argv, workdir, name, wrapper=()):
        self.log = open(os.path.join(workdir, name + ".log"), "w+b")
        self.proc = subprocess.Popen(["taskset", "-c", "0", *wrapper, *argv],
                                     stdout=subprocess.DEVNULL, stderr=self.log, cwd=workdir)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.log.seek(0)
            m = LISTEN_RE.search(self.log.read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{argv[0]} did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def ab(url, requests, concurrency=8):
    out = subprocess.run(["taskset", "-c", "1", "ab", "-q", "-k", "-n", str(requests), "-c",
                          str(concurrency), url], capture_output=True, text=True, timeout=900)
    done = int(re.search(r"Complete requests:\s+(\d+)", out.stdout).group(1))
    failed = int(re.search(r"Failed requests:\s+(\d+)", out.stdout).group(1))
    if failed or re.search(r"Non-2xx responses:", out.stdout):
        raise RuntimeError(f"ab reported failures:\n{out.stdout}")
    return done


def instructions(argv, path, requests, workdir, tag):
    out = os.path.join(workdir, f"callgrind-{tag}")
    srv = Server(argv, workdir, tag,
                 wrapper=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    try:
        url = f"http://127.0.0.1:{srv.port}{path}"
        ab(url, 500)
        subprocess.run(["callgrind_control", "-z", str(srv.proc.pid)], check=True,
                       capture_output=True)
        done = ab(url, requests)
        subprocess.run(["callgrind_control", "-d", str(srv.proc.pid)], check=True,
                       capture_output=True)
    finally:
        srv.stop()
    # The dump requested above is the file with a part number; the one written at exit has none.
    dump = sorted(f for f in os.listdir(workdir) if f.startswith(f"callgrind-{tag}."))[0]
    with open(os.path.join(workdir, dump)) as f:
        total = sum(int(m.group(1)) for m in re.finditer(r"^summary:\s+(\d+)", f.read(), re.M))
    return total / done


def user_share(argv, path, workdir, requests=200000):
    srv = Server(argv, workdir, "share")

    def ticks():
        with open(f"/proc/{srv.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]), int(fields[12])  # utime, stime

    try:
        url = f"http://127.0.0.1:{srv.port}{path}"
        ab(url, 2000)
        u0, s0 = ticks()
        ab(url, requests)
        u1, s1 = ticks()
        return (u1 - u0) / max(1, (u1 - u0) + (s1 - s0))
    finally:
        srv.stop()


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
            f.write(RETURN_CONFIG.format(root=workdir))
        hello = [HELLO, "--listen", "127.0.0.1:0", "--workers", "1"]
        rows = [("return route", [PEREGRINE, "-c", config], "/"),
                ("library sync", hello, "/"),
                ("library callback", hello, "/callback"),
                ("library coroutine", hello, "/coroutine")]
        base = None
        share = user_share(rows[0][1], rows[0][2], workdir)
        print(f"user-space share of the return route's CPU time: {share * 100:.0f} %")
        print(f"{'handler':18} {'instr/req':>10} {'vs return':>10} {'CPU vs return':>14}")
        for i, (name, argv, path) in enumerate(rows):
            n = instructions(argv, path, opts.requests, workdir, f"run{i}")
            base = base or n
            print(f"{name:18} {n:>10.0f} {n / base:>9.3f}x {1 + (n - base) / base * share:>13.3f}x",
                  flush=True)


if __name__ == "__main__":
    main()
