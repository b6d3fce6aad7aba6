"""The AJP scenario (issue 18): Tomcat 10 behind four fronts, at 100, 500 and 1,000 connections.

Fronts: Peregrine's AJP route, Apache 2.4 (event MPM) with mod_jk, Apache with mod_proxy_ajp,
and Peregrine's HTTP proxy to Tomcat's HTTP connector. Pages: small.jsp (663 bytes) and slow.jsp
(sleeps 4 ms), from tests/integration/ajp_webapp. One Tomcat (tests/integration/tomcat.py) serves
all fronts; every front runs from its own config in a temp dir on a loopback ephemeral port (never
a system service). As in bench/run.py, the front runs on CPU 0 and wrk on CPU 1. Tomcat's JVM
may use both: it is the application server, and pinned beside wrk on one core it, not the front,
set every row's req/s (all four fronts within a few percent) and collapsed at 1,000 connections
on the 4 ms page (153 req/s and below for every front). Per run: wrk -t1 --latency, requests/s,
p99, errors (socket errors + non-2xx), and the front's CPU time per request (schedstat, all its
processes and threads).

    /usr/bin/python3 bench/peregrine_bench/ajp.py [--duration 5] [--runs 1] [--conns 100,500,1000]
        [--event-backend io_uring]

A standalone runner beside bench/run.py: Tomcat's JVM and Apache's config do not fit the
driver's one-server-per-class shape. python3 stdlib only; only 127.0.0.1 is targeted.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import tomcat  # noqa: E402
from peregrine_bench import measure  # noqa: E402
from peregrine_bench.common import CLIENT_CPU, SERVER_CPU, labelled_binaries  # noqa: E402
from peregrine_bench.load import parse_wrk  # noqa: E402
from peregrine_bench.procs import free_port, http_get  # noqa: E402

SECRET = "bench-secret-0123456789"
PAGES = {"page663": "/small.jsp", "slow4ms": "/slow.jsp"}
APACHE = "/usr/sbin/apache2"
MODULES = "/usr/lib/apache2/modules"
PEREGRINE = os.environ.get("PEREGRINE_BIN") or os.path.join(REPO, "build/release/peregrine")


class Front:
    def __init__(self, name, workdir):
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.proc = None

    def start(self):
        self.log = open(os.path.join(self.dir, "console.log"), "wb")
        self.proc = subprocess.Popen(["taskset", "-c", str(SERVER_CPU)] + self.command(),
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=self.dir, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {open(self.log.name).read()[-2000:]}")
            try:
                status, _, _ = http_get(self.port, "/small.jsp", timeout=10)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} does not answer 200 on /small.jsp")

    def pids(self):
        return measure.process_tree(self.proc.pid)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.log.close()


class PeregrineFront(Front):
    def __init__(self, name, workdir, route, workers, binary=PEREGRINE, event_backend=""):
        super().__init__(name, workdir)
        self.binary = binary
        backend = f'event_backend = "{event_backend}"\n' if event_backend else ""
        with open(os.path.join(self.dir, "peregrine.toml"), "w") as f:
            f.write(f'listen = ["127.0.0.1:{self.port}"]\nworkers = {workers}\n{backend}'
                    f'[limits]\nmax_connections = 20000\n'
                    f'[[site]]\nhosts = ["localhost"]\ndefault = true\nroot = "{self.dir}"\n'
                    f'access_log = "off"\n[[site.route]]\nprefix = "/"\n{route}\n')

    def command(self):
        return [self.binary, "-c", os.path.join(self.dir, "peregrine.toml")]


class ApacheFront(Front):
    def __init__(self, name, workdir, body, modules):
        super().__init__(name, workdir)
        user = "User nobody\nGroup nogroup\n" if os.geteuid() == 0 else ""
        loads = "".join(f"LoadModule {m}_module {MODULES}/mod_{m}.so\n" for m in modules)
        with open(os.path.join(self.dir, "httpd.conf"), "w") as f:
            f.write(f"""ServerRoot {self.dir}
DefaultRuntimeDir {self.dir}
PidFile {self.dir}/httpd.pid
Listen 127.0.0.1:{self.port}
ServerName localhost
{user}LoadModule mpm_event_module {MODULES}/mod_mpm_event.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
{loads}ErrorLog {self.dir}/error.log
LogLevel warn
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60
StartServers 4
ServerLimit 32
ThreadsPerChild 64
ThreadLimit 64
MaxRequestWorkers 2048
MinSpareThreads 128
MaxSpareThreads 2048
{body}
""")

    def command(self):
        return [APACHE, "-f", os.path.join(self.dir, "httpd.conf"), "-DFOREGROUND"]


def make_fronts(workdir, t, workers, builds=(), event_backend=""):
    ajp = f"ajp://127.0.0.1:{t.ajp_port}"
    ajp_route = f'ajp = "{ajp}"\najp_secret = "{SECRET}"'
    if builds:
        return [PeregrineFront(f"peregrine-ajp-{label}", workdir, ajp_route, workers, binary,
                               event_backend)
                for label, binary in builds]
    fronts = [
        PeregrineFront("peregrine-ajp", workdir, ajp_route, workers, event_backend=event_backend),
        PeregrineFront("peregrine-http", workdir, f'proxy = "http://127.0.0.1:{t.http_port}"\n'
                                                  f'x_forwarded = false', workers,
                       event_backend=event_backend),
    ]
    if os.access(APACHE, os.X_OK):
        jk = os.path.join(workdir, "apache-mod_jk")
        os.makedirs(jk, exist_ok=True)
        with open(os.path.join(jk, "workers.properties"), "w") as f:
            f.write(f"worker.list=tomcat\nworker.tomcat.type=ajp13\nworker.tomcat.host=127.0.0.1\n"
                    f"worker.tomcat.port={t.ajp_port}\nworker.tomcat.secret={SECRET}\n"
                    f"worker.tomcat.connection_pool_timeout=60\n")
        fronts.append(ApacheFront("apache-mod_jk", workdir, f"""JkWorkersFile {jk}/workers.properties
JkShmFile {jk}/jk.shm
JkLogFile {jk}/mod_jk.log
JkLogLevel error
JkMount /* tomcat""", ["jk"]))
        fronts.append(ApacheFront("apache-proxy_ajp", workdir,
                                  f"ProxyPass / {ajp}/ secret={SECRET}\n", ["proxy", "proxy_ajp"]))
    return fronts


def wrk_run(front, path, conns, duration):
    cmd = ["taskset", "-c", str(CLIENT_CPU), "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency",
           "--timeout", "10s", f"http://127.0.0.1:{front.port}{path}"]
    pids = front.pids()
    s0 = measure.cpu_sample(pids)
    w0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60).stdout
    w1 = time.monotonic()
    s1 = measure.cpu_sample(front.pids())
    r = parse_wrk(out)
    r["cpu_us_per_req"] = (s1[0] - s0[0]) / 1e3 / max(r["requests"], 1)
    r["wall"] = w1 - w0
    r["cmd"] = " ".join(cmd)
    return r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--runs", type=int, default=1, help="runs per cell; the median is reported")
    p.add_argument("--conns", default="100,500,1000")
    p.add_argument("--pages", default=",".join(PAGES))
    p.add_argument("--fronts", default="", help="comma-separated subset of the front names")
    p.add_argument("--workers", type=int, default=1, help="Peregrine's workers (one CPU: 1)")
    p.add_argument("--event-backend", choices=("epoll", "io_uring", "auto"), default="",
                   help="Peregrine's event_backend (default: its own default, epoll)")
    p.add_argument("--peregrine-binary", action="append", default=[], metavar="LABEL=PATH",
                   help="compare builds instead of fronts: one AJP front per build, named "
                        "peregrine-ajp-LABEL, measured in turns (repeat the option)")
    args = p.parse_args(argv)
    conns = [int(c) for c in args.conns.split(",")]
    pages = args.pages.split(",")
    builds = labelled_binaries(args.peregrine_binary, p.error)
    for label, path in builds:
        if not os.access(path, os.X_OK):
            p.error(f"--peregrine-binary {label}={path}: not an executable")
    workdir = tempfile.mkdtemp(prefix="peregrine-bench-ajp-")
    t = tomcat.Tomcat(os.path.join(workdir, "tomcat"), secret=SECRET, threads=400, heap="512m")
    fronts = []
    results = []
    try:
        t.start()
        t.warm_up(["/small.jsp", "/slow.jsp"])
        fronts = make_fronts(workdir, t, args.workers, builds, args.event_backend)
        if args.fronts:
            fronts = [f for f in fronts if f.name in args.fronts.split(",")]
        for f in fronts:
            f.start()
        print(f"# Tomcat {t.ajp_port}/{t.http_port}; fronts: " +
              ", ".join(f"{f.name}:{f.port}" for f in fronts), flush=True)
        for page in pages:
            path = PAGES[page]
            for c in conns:
                for f in fronts:  # warm-up: JIT and connection pools
                    wrk_run(f, path, c, 2)
                cells = {f.name: [] for f in fronts}
                for i in range(args.runs):
                    k = i % len(fronts)
                    for f in fronts[k:] + fronts[:k]:  # rotate the order between runs
                        cells[f.name].append(wrk_run(f, path, c, args.duration))
                for f in fronts:
                    runs = cells[f.name]
                    row = dict(page=page, conns=c, front=f.name,
                               rps=statistics.median(r["rps"] for r in runs),
                               p99=statistics.median(r["p99_ms"] or 0 for r in runs),
                               errors=sum(r["errors"] for r in runs),
                               cpu=statistics.median(r["cpu_us_per_req"] for r in runs),
                               cmd=runs[-1]["cmd"])
                    results.append(row)
                    print(f"{page:8} c={c:<5} {f.name:17} {row['rps']:9.0f} req/s  p99 "
                          f"{row['p99']:8.1f} ms  errors {row['errors']:6}  front CPU "
                          f"{row['cpu']:7.1f} us/req", flush=True)
    finally:
        for f in fronts:
            f.stop()
        t.stop()
        shutil.rmtree(workdir, True)
    return results


if __name__ == "__main__":
    main()
