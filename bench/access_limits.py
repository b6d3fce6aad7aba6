#!/usr/bin/env python3
"""Side by side: the `small` scenario (/11.txt, 100 keep-alive connections, wrk) against one
Peregrine binary with and without access control on the route — a rate limit (high enough never
to refuse, so every request goes through the token bucket) and a deny list of five networks that
the client's address falls through. Issue 17's target: CPU per request rises by at most 5 %.

Both servers run with one worker pinned to CPU 0 and wrk on CPU 1, as bench/run.py does; the two
variants alternate within each round so they share the machine's background noise. Prints the
server CPU µs per request of each run and the medians.

    python3 bench/access_limits.py [--binary build/release/peregrine] [--runs 3] [--duration 8]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peregrine_bench import measure  # noqa: E402
from peregrine_bench.common import CLIENT_CPU, SERVER_CPU  # noqa: E402
from peregrine_bench.load import parse_wrk  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ACCESS_TOML = """
[[limit]]
name = "flood"
rate = "1000000r/s"
burst = 1000000
"""

ROUTE_ACCESS = """limit = ["flood"]
access = [ { deny = "10.0.0.0/8" }, { deny = "172.16.0.0/12" }, { deny = "192.168.0.0/16" },
           { deny = "2001:db8::/32" }, { deny = "198.51.100.0/24" }, { allow = "all" } ]
"""


def config(workdir, docroot, limited):
    return f"""listen = ["127.0.0.1:0"]
workers = 1
error_log = "{workdir}/error-{'limited' if limited else 'plain'}.log"
{ACCESS_TOML if limited else ''}
[[site]]
root = "{docroot}"
access_log = "off"

[[site.route]]
prefix = "/"
{ROUTE_ACCESS if limited else ''}"""


def start(binary, workdir, docroot, limited):
    path = os.path.join(workdir, f"{'limited' if limited else 'plain'}.toml")
    with open(path, "w") as f:
        f.write(config(workdir, docroot, limited))
    log = os.path.join(workdir, f"error-{'limited' if limited else 'plain'}.log")
    if os.path.exists(log):
        os.unlink(log)
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, binary, "-c", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(log).read())
        except OSError:
            m = None
        if m and m.group(1) != "0":
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"server did not start: {path}\n" + open(log).read())


def wrk(port, duration):
    out = subprocess.run(["taskset", "-c", CLIENT_CPU, "wrk", "-t1", "-c100", f"-d{duration}s",
                          "--latency", f"http://127.0.0.1:{port}/11.txt"],
                         capture_output=True, text=True, check=True).stdout
    return parse_wrk(out)


def one_run(binary, workdir, docroot, limited, duration, warmup):
    proc, port = start(binary, workdir, docroot, limited)
    try:
        wrk(port, warmup)
        before = measure.cpu_sample([proc.pid])
        result = wrk(port, duration)
        after = measure.cpu_sample([proc.pid])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if result["errors"]:
        raise SystemExit(f"{'limited' if limited else 'plain'}: {result['errors']} errors "
                         f"(non-2xx {result['non_2xx_3xx']}): the limit must not refuse")
    return (after[0] - before[0]) / 1000 / result["requests"], result["rps"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(REPO, "build/release/peregrine"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pg-access-bench-") as workdir:
        docroot = os.path.join(workdir, "www")
        os.makedirs(docroot)
        with open(os.path.join(docroot, "11.txt"), "w") as f:
            f.write("hello world")
        cpu = {False: [], True: []}
        for run in range(args.runs):
            order = (False, True) if run % 2 == 0 else (True, False)
            for limited in order:
                us, rps = one_run(args.binary, workdir, docroot, limited, args.duration,
                                  args.warmup)
                cpu[limited].append(us)
                print(f"run {run + 1} {'limited' if limited else 'plain  '}: "
                      f"{us:.3f} µs CPU/request, {rps:,.0f} req/s", flush=True)
        plain, limited = statistics.median(cpu[False]), statistics.median(cpu[True])
        print(f"median plain   {plain:.3f} µs/request")
        print(f"median limited {limited:.3f} µs/request  ({(limited / plain - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
