#!/usr/bin/env python3
"""Client-side benchmark: what does each load generator cost per request?

peregrine-bench vs wrk vs ab against the same nginx (one worker, pinned to CPU 0), each client
pinned to CPU 1. For every run the client's own CPU time (utime + stime of the child from
wait4(), all threads) is divided by the requests it completed. A second part runs the clients
with two threads over both cores (peregrine-bench -W 2, wrk -t2; nginx still on CPU 0) and
compares throughput. Not a pass/fail test: it prints figures; --json writes them.

    python3 bench/client_bench.py [--runs 3] [--duration 5] [--bench build/release/peregrine-bench]

Only 127.0.0.1 is ever targeted. python3 stdlib only; needs nginx, wrk, ab and taskset.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PAGE = b"<html>" + b"x" * 600 + b"</html>"  # a 612-byte static page, nginx's welcome page size


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(self, workdir):
        self.dir = workdir
        self.port = free_port()
        root = os.path.join(workdir, "www")
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "index.html"), "wb") as f:
            f.write(PAGE)
        user = "user root root;\n" if os.geteuid() == 0 else ""
        conf = f"""{user}worker_processes 1;
worker_rlimit_nofile 20000;
daemon off;
master_process on;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    sendfile on;
    open_file_cache max=100;
    default_type text/html;
    client_body_temp_path {workdir}/cb; proxy_temp_path {workdir}/px; fastcgi_temp_path {workdir}/fc;
    uwsgi_temp_path {workdir}/uw; scgi_temp_path {workdir}/sc;
    server {{
        listen 127.0.0.1:{self.port};
        root {root};
        location = /hello {{ return 200 "hello world"; }}
    }}
}}
"""
        self.conf = os.path.join(workdir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(["taskset", "-c", "0", shutil.which("nginx"), "-p", workdir + "/",
                                      "-e", f"{workdir}/error.log", "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start")

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_client(cmd, timeout):
    """Runs cmd; returns (stdout, cpu seconds of the child and its threads, wall seconds)."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = b""
    deadline = start + timeout
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            p.kill()
            break
        if sel.select(timeout=left):
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return out.decode("utf-8", "replace"), ru.ru_utime + ru.ru_stime, time.monotonic() - start


def requests_of(tool, out):
    if tool == "peregrine-bench":
        j = json.loads(out)
        return j["complete_requests"], j["failed_requests"] + j["non_2xx_responses"]
    if tool == "wrk":
        n = int(re.search(r"(\d+) requests in", out).group(1))
        errs = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        return n, errs + (int(m.group(1)) if m else 0)
    n = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
    return n, failed


def commands(tool, url, conns, secs, keep_alive, threads, bench_bin):
    if tool == "peregrine-bench":
        c = [bench_bin, "--json", "-q", "-c", str(conns), "-t", str(secs), "-W", str(threads)]
        return c + (["-k"] if keep_alive else []) + [url]
    if tool == "wrk":
        c = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s"]
        return c + ([] if keep_alive else ["-H", "Connection: close"]) + [url]
    c = ["ab", "-q", "-c", str(conns), "-t", str(secs), "-n", "2000000"]  # -n after -t lifts ab's 50000 cap
    return c + (["-k"] if keep_alive else []) + [url]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--bench", default=os.path.join(REPO, "build/release/peregrine-bench"))
    ap.add_argument("--json", help="write every run to this file")
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "ab", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")
    if not os.path.exists(args.bench):
        sys.exit(f"{args.bench} not built")

    tmp = tempfile.mkdtemp(prefix="client-bench-")
    nginx = Nginx(tmp)
    results = {"args": vars(args), "cpu": [], "throughput": []}
    tools = ("peregrine-bench", "wrk", "ab")
    try:
        scenarios = [("keep-alive, return 200", "/hello", True), ("keep-alive, 612-byte file", "/index.html", True),
                     ("new connection per request, return 200", "/hello", False),
                     ("new connection per request, 612-byte file", "/index.html", False)]
        print(f"nginx 1 worker on CPU 0, clients on CPU 1, {args.conns} connections, {args.duration} s runs, "
              f"median of {args.runs}\n")
        print(f"{'scenario':44} {'client':16} {'req/s':>10} {'client CPU us/req':>18} {'errors':>7}")
        for name, path, ka in scenarios:
            url = f"http://127.0.0.1:{nginx.port}{path}"
            per_tool = {t: [] for t in tools}
            for run in range(args.runs):
                order = tools[run % 3:] + tools[:run % 3]
                for tool in order:
                    cmd = ["taskset", "-c", "1"] + commands(tool, url, args.conns, args.duration, ka, 1, args.bench)
                    out, cpu, wall = run_client(cmd, args.duration + 30)
                    n, errors = requests_of(tool, out)
                    per_tool[tool].append({"requests": n, "errors": errors, "cpu_s": cpu, "wall_s": wall,
                                           "rps": n / args.duration, "cpu_us_per_req": 1e6 * cpu / max(n, 1)})
                    time.sleep(1 if not ka else 0.2)  # let TIME_WAIT sockets settle a little
            for tool in tools:
                runs = per_tool[tool]
                rps = statistics.median(r["rps"] for r in runs)
                us = statistics.median(r["cpu_us_per_req"] for r in runs)
                errs = sum(r["errors"] for r in runs)
                print(f"{name:44} {tool:16} {rps:10.0f} {us:18.2f} {errs:7d}")
                results["cpu"].append({"scenario": name, "tool": tool, "median_rps": rps,
                                       "median_cpu_us_per_req": us, "runs": runs})
            print()

        print("two client threads over both cores (nginx still 1 worker on CPU 0), keep-alive /hello")
        url = f"http://127.0.0.1:{nginx.port}/hello"
        per_tool = {"peregrine-bench -W 2": [], "wrk -t2": []}
        for run in range(args.runs):
            for tool, key in (("peregrine-bench", "peregrine-bench -W 2"), ("wrk", "wrk -t2")):
                cmd = ["taskset", "-c", "0,1"] + commands(tool, url, args.conns, args.duration, True, 2, args.bench)
                out, cpu, wall = run_client(cmd, args.duration + 30)
                n, errors = requests_of(tool, out)
                per_tool[key].append({"requests": n, "errors": errors, "rps": n / args.duration, "cpu_s": cpu})
        for key, runs in per_tool.items():
            rps = statistics.median(r["rps"] for r in runs)
            each = ", ".join("%.0f" % r["rps"] for r in runs)
            print(f"  {key:22} {rps:10.0f} req/s   (runs: {each})")
            results["throughput"].append({"tool": key, "median_rps": rps, "runs": runs})
    finally:
        nginx.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
