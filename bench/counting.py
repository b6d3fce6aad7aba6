"""What bench/metrics_cost.py and bench/library_cost.py share: a server started on a pinned CPU
(optionally under a wrapper such as valgrind), ab runs, and the two counted figures, user-space
instructions per request under callgrind and the user-space share of a server's CPU time.

On this 2-core, shared machine timing cannot resolve a few per cent; instruction counts repeat
to a few instructions. A change that adds no system call changes CPU time by its share of the
user-space instructions times the user-space share of the CPU time.
"""

import os
import re
import subprocess
import time

LISTEN_RE = re.compile(rb"\] listening on 127\.0\.0\.1:(\d+)")


class Server:
    """`argv` started pinned to `cpu`, its stderr in WORKDIR/NAME.log; .port once it listens."""

    def __init__(self, argv, workdir, name, cpu=0, wrapper=()):
        self.log = open(os.path.join(workdir, name + ".log"), "w+b")
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), *wrapper, *argv],
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
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{argv[0]} did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def ab(url, requests, concurrency=32):
    """Keep-alive ab on CPU 1; the requests it completed. Any failure or non-2xx raises."""
    out = subprocess.run(["taskset", "-c", "1", "ab", "-q", "-k", "-n", str(requests), "-c",
                          str(concurrency), url], capture_output=True, text=True, timeout=900)
    done = int(re.search(r"Complete requests:\s+(\d+)", out.stdout).group(1))
    failed = int(re.search(r"Failed requests:\s+(\d+)", out.stdout).group(1))
    if failed or re.search(r"Non-2xx responses:", out.stdout):
        raise RuntimeError(f"ab reported failures:\n{out.stdout}")
    return done


def instructions_per_request(argv, path, requests, workdir, tag):
    """User-space instructions per request of `argv` (one worker) under callgrind: counters
    zeroed after a 500-request warm-up, dumped after `requests` more (ab -k -c 8)."""
    out = os.path.join(workdir, f"callgrind-{tag}")
    srv = Server(argv, workdir, tag,
                 wrapper=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    try:
        url = f"http://127.0.0.1:{srv.port}{path}"
        ab(url, 500, concurrency=8)
        subprocess.run(["callgrind_control", "-z", str(srv.proc.pid)], check=True,
                       capture_output=True)
        done = ab(url, requests, concurrency=8)
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
    """The user-space part of `argv`'s CPU time over a plain ab run (utime and stime ticks)."""
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
