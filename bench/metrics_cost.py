#!/usr/bin/env python3
"""What the live metrics cost (issue 14, item 6): server CPU time per request with the counting
compiled in (the normal build) and compiled out (-DPEREGRINE_METRICS=OFF), side by side, on the
small-file and the proxy scenarios. Target: at most 2 % more CPU per request.

    /usr/bin/python3 bench/metrics_cost.py [--build] [--rounds 5] [--requests 100000]

--build configures and builds build/nometrics (Release, metrics off) first; the metrics-on
binary is build/release/peregrine. Each round runs both binaries in alternating order, so drift
on a shared machine hits both alike; the figure per scenario is the median over rounds.

CPU per request is the server's on-CPU time (the sum of /proc/PID/task/*/schedstat over its
threads, in ns: finer than utime+stime's 10 ms ticks) over the ab run, divided by the requests
ab completed. The server is pinned to CPU 0 with one worker, ab (and the proxy's back end) to
CPU 1, as bench/README.md does.

--instructions counts instead, under callgrind, the user-space instructions the server executes
per request (counters zeroed after a warm-up, dumped after the measured run): repeatable to a
fraction of a percent on a busy two-core machine, where time is not. Metrics add no system call:
their share of the CPU time is their share of the user-space instructions times the user-space
share of the server's CPU time (utime over utime + stime in a plain ab run of the same scenario).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from counting import Server, ab, instructions_per_request, user_share

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ON = os.path.join(REPO, "build/release/peregrine")
OFF = os.path.join(REPO, "build/nometrics/peregrine")


def build_off():
    subprocess.run(["cmake", "-S", REPO, "-B", os.path.join(REPO, "build/nometrics"), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG",
                    "-DPEREGRINE_METRICS=OFF", "-DPEREGRINE_TESTS=OFF"], check=True)
    subprocess.run(["cmake", "--build", os.path.join(REPO, "build/nometrics"), "-j2", "--target",
                    "peregrine"], check=True)


def cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def server_argv(binary, args):
    return [binary, "--listen", "127.0.0.1:0", "--workers", "1", "--access-log", "off"] + args


def measure(binary, scenario, requests, workdir, backend_port):
    path = "/small.html"
    srv = Server(server_argv(binary, scenario_args(scenario, workdir, backend_port)), workdir,
                 f"server-{scenario}", cpu=0)
    try:
        url = f"http://127.0.0.1:{srv.port}{path}"
        ab(url, 2000)  # warm caches and pools
        before = cpu_ns(srv.proc.pid)
        done = ab(url, requests)
        after = cpu_ns(srv.proc.pid)
        return (after - before) / done
    finally:
        srv.stop()


def scenario_args(scenario, workdir, backend_port):
    if scenario == "proxy":
        return ["--proxy", f"http://127.0.0.1:{backend_port}"]
    return ["--root", os.path.join(workdir, "www")]


def count_instructions(opts, workdir, backend_port):
    # The instructions metrics add are user-space ones; the kernel's share of the CPU time (the
    # system calls) is untouched, so the CPU cost is the instruction cost times the user share.
    print(f"{'scenario':8} {'on instr/req':>13} {'off instr/req':>14} {'instr':>8} "
          f"{'user share':>10} {'CPU cost':>9}")
    for scenario in opts.scenarios.split(","):
        args = scenario_args(scenario, workdir, backend_port)
        on = instructions_per_request(server_argv(ON, args), "/small.html", opts.requests,
                                      workdir, f"{scenario}-on")
        off = instructions_per_request(server_argv(OFF, args), "/small.html", opts.requests,
                                       workdir, f"{scenario}-off")
        share = user_share(server_argv(ON, args), "/small.html", workdir)
        cost = (on - off) / off
        print(f"{scenario:8} {on:>13.0f} {off:>14.0f} {cost * 100:>+7.2f}% {share * 100:>9.0f}% "
              f"{cost * share * 100:>+8.2f}%", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="store_true", help="build build/nometrics first")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, help="per run (default 100000, 5000 counting)")
    parser.add_argument("--scenarios", default="small,proxy")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per request under callgrind instead of time")
    opts = parser.parse_args()
    opts.requests = opts.requests or (5000 if opts.instructions else 100000)
    if opts.build:
        build_off()
    for binary in (ON, OFF):
        if not os.path.exists(binary):
            sys.exit(f"{binary} is missing (build it; --build makes the metrics-off one)")
    with tempfile.TemporaryDirectory(prefix="metrics-cost-") as workdir:
        os.makedirs(os.path.join(workdir, "www"))
        with open(os.path.join(workdir, "www", "small.html"), "w") as f:
            f.write("x" * 100)
        backend = Server(server_argv(ON, ["--root", os.path.join(workdir, "www")]), workdir,
                         "backend", cpu=1)
        try:
            if opts.instructions:
                count_instructions(opts, workdir, backend.port)
                return
            print(f"{'scenario':8} {'round':>5} {'on ns/req':>10} {'off ns/req':>10}")
            results = {}
            for scenario in opts.scenarios.split(","):
                on, off = [], []
                for r in range(opts.rounds):
                    order = [(ON, on), (OFF, off)] if r % 2 == 0 else [(OFF, off), (ON, on)]
                    for binary, sink in order:
                        sink.append(measure(binary, scenario, opts.requests, workdir, backend.port))
                    print(f"{scenario:8} {r + 1:>5} {on[-1]:>10.0f} {off[-1]:>10.0f}", flush=True)
                paired = statistics.median(a / b for a, b in zip(on, off))
                results[scenario] = (statistics.median(on), statistics.median(off), paired)
            print()
            # "paired": the median over rounds of on/off within a round, which cancels the load
            # that drifts between rounds on a shared machine better than the ratio of medians.
            print(f"{'scenario':8} {'on (median)':>12} {'off (median)':>13} {'cost':>8} {'paired':>8}")
            for scenario, (on_ns, off_ns, paired) in results.items():
                print(f"{scenario:8} {on_ns:>10.0f}ns {off_ns:>11.0f}ns "
                      f"{(on_ns - off_ns) / off_ns * 100:>+7.2f}% {(paired - 1) * 100:>+7.2f}%")
        finally:
            backend.stop()


if __name__ == "__main__":
    main()
