#!/usr/bin/env python3
"""On-the-fly compression benchmark (issue 16; docs/compression.md, docs/performance.md).

A 54 KB WordPress-like home page, as a static file and from PHP (readfile()), compressed by
Peregrine, nginx (gzip only) and H2O (gzip and brotli) at the same levels. Server on CPU 0, wrk
and php-fpm on CPU 1, 100 keep-alive connections; server CPU per request from
/proc/PID/task/TID/schedstat; medians of --runs runs.

    python3 bench/compression.py [--runs 3] [--duration 8] [--peregrine build/release/peregrine]

Standalone (not a bench/run.py scenario) so the shared scenario tables stay untouched; it reuses
the package's /proc measurement, wrk parser and php-fpm back end.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peregrine_bench import measure  # noqa: E402
from peregrine_bench.backends import PhpFpm  # noqa: E402
from peregrine_bench.common import CLIENT_CPU, SERVER_CPU  # noqa: E402
from peregrine_bench.pages import wordpress_like_page  # noqa: E402
from peregrine_bench.load import parse_wrk  # noqa: E402
from peregrine_bench.procs import free_port  # noqa: E402
from peregrine_bench.servers import NGINX_FASTCGI_PARAMS  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONNS = 100


def wait_port(port, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class Server:
    def __init__(self, name, workdir, argv, port):
        self.name, self.workdir, self.port = name, workdir, port
        self.err = open(os.path.join(workdir, f"{name}.stderr"), "ab")
        self.proc = subprocess.Popen(["taskset", "-c", SERVER_CPU] + argv, cwd=workdir,
                                     stdin=subprocess.DEVNULL, stdout=self.err, stderr=self.err,
                                     start_new_session=True)
        wait_port(port)
        time.sleep(0.2)

    def pids(self):
        return measure.process_tree(self.proc.pid)

    def stop(self):
        try:
            os.killpg(self.proc.pid, 15)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self.err.close()


def peregrine(workdir, docroot, fpm, binary, levels):
    port = free_port()
    conf = f"""listen = ["127.0.0.1:{port}"]
workers = 1
error_log = "{workdir}/peregrine-error.log"

[[upstream]]
name = "php"
keepalive = 32
[[upstream.server]]
address = "unix:{fpm.socket_for('peregrine')}"
max_conns = 8

[[site]]
root = "{docroot}"
access_log = "off"
compress = {{ gzip_level = {levels['gzip']}, brotli_level = {levels['br']} }}

[[site.route]]
extension = "php"
fastcgi = "php"
"""
    path = os.path.join(workdir, "peregrine.toml")
    with open(path, "w") as f:
        f.write(conf)
    return Server("peregrine", workdir, [binary, "-c", path], port)


def nginx(workdir, docroot, fpm, level):
    port = free_port()
    params = "".join(f"            fastcgi_param {k} {v};\n" for k, v in NGINX_FASTCGI_PARAMS)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    conf = f"""{user}worker_processes 1;
daemon off;
master_process on;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    open_file_cache max=1000;
    types {{ text/html html; }}
    default_type application/octet-stream;
    client_body_temp_path {workdir}/cb; proxy_temp_path {workdir}/px;
    fastcgi_temp_path {workdir}/fc; uwsgi_temp_path {workdir}/uw; scgi_temp_path {workdir}/sc;
    gzip on;
    gzip_comp_level {level};
    gzip_min_length 256;
    upstream php {{ server unix:{fpm.socket_for('nginx')}; keepalive 8; }}
    server {{
        listen 127.0.0.1:{port};
        root {docroot};
        location ~ \\.php$ {{
            fastcgi_pass php;
            fastcgi_keep_conn on;
{params}        }}
    }}
}}
"""
    path = os.path.join(workdir, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    return Server("nginx", workdir, ["/usr/sbin/nginx", "-c", path, "-p", workdir], port)


def h2o(workdir, docroot, fpm, levels):
    port = free_port()
    user = "user: root\n" if os.geteuid() == 0 else ""
    conf = f"""{user}num-threads: 1
pid-file: {workdir}/h2o.pid
error-log: {workdir}/h2o-error.log
listen:
  host: 127.0.0.1
  port: {port}
compress:
  gzip: {levels['gzip']}
  br: {levels['br']}
compress-minimum-size: 256
hosts:
  default:
    paths:
      /:
        file.dir: {docroot}
        file.custom-handler:
          extension: .php
          fastcgi.connect:
            port: {fpm.socket_for('h2o')}
            type: unix
"""
    path = os.path.join(workdir, "h2o.conf")
    with open(path, "w") as f:
        f.write(conf)
    return Server("h2o", workdir, ["/usr/bin/h2o", "-c", path], port)


def response_size(port, path, accept):
    """Bytes on the wire for the body (decoded framing), and a check that it decodes."""
    out = subprocess.run(["curl", "-s", "--raw", "-H", f"Accept-Encoding: {accept}",
                          f"http://127.0.0.1:{port}{path}", "-o", "-", "-D", "/dev/stderr"],
                         capture_output=True, timeout=30)
    body = out.stdout
    head = out.stderr.decode("latin-1").lower()
    if "transfer-encoding: chunked" in head:
        plain = b""
        rest = body
        while rest:
            line, _, rest = rest.partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            if size == 0:
                break
            plain += rest[:size]
            rest = rest[size + 2:]
        body = plain
    encoding = ""
    for line in head.splitlines():
        if line.startswith("content-encoding:"):
            encoding = line.split(":", 1)[1].strip()
    return len(body), encoding, body


def run_wrk(server, path, accept, duration):
    cmd = ["taskset", "-c", CLIENT_CPU, "wrk", "-t1", f"-c{CONNS}", f"-d{duration}s"]
    if accept:
        cmd += ["-H", f"Accept-Encoding: {accept}"]
    cmd.append(f"http://127.0.0.1:{server.port}{path}")
    pids = server.pids()
    ns0 = measure.cpu_sample(pids)[0]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60).stdout
    ns1 = measure.cpu_sample(pids)[0]
    r = parse_wrk(out)
    if r["non_2xx_3xx"] or not r["requests"]:
        raise RuntimeError(f"{server.name} {path}: bad run\n{out}")
    if r["errors"]:  # wrk's timeouts when php-fpm stalls: reported, not fatal
        print(f"  ({server.name}: {r['socket_errors']})", flush=True)
    return (ns1 - ns0) / 1000 / r["requests"], r["requests"] / duration


SCENARIOS = [
    # name, path, Accept-Encoding, levels, servers
    ("static, identity", "/wp.html", "", {"gzip": 6, "br": 4}, ("peregrine", "nginx", "h2o")),
    ("static, gzip 6", "/wp.html", "gzip", {"gzip": 6, "br": 4}, ("peregrine", "nginx", "h2o")),
    ("static, br 4", "/wp.html", "br", {"gzip": 6, "br": 4}, ("peregrine", "h2o")),
    ("PHP readfile, gzip 1", "/wp.php", "gzip", {"gzip": 1, "br": 4}, ("peregrine", "nginx")),
    ("PHP readfile, gzip 6", "/wp.php", "gzip", {"gzip": 6, "br": 4}, ("peregrine", "nginx", "h2o")),
    ("PHP readfile, br 4", "/wp.php", "br", {"gzip": 6, "br": 4}, ("peregrine", "h2o")),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--peregrine", default=os.path.join(REPO, "build/release/peregrine"))
    p.add_argument("--scenarios", default="", help="comma-separated substrings of scenario names")
    args = p.parse_args()

    tmp = tempfile.mkdtemp(prefix="peregrine-compress-bench-")
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    os.chmod(tmp, 0o755)
    os.chmod(docroot, 0o755)
    page = wordpress_like_page()
    with open(os.path.join(docroot, "wp.html"), "wb") as f:
        f.write(page)
    with open(os.path.join(docroot, "wp.php"), "w") as f:
        f.write("<?php readfile(__DIR__ . '/wp.html');\n")
    fpm = PhpFpm(os.path.join(tmp, "fpm"))
    fpm.start(["peregrine", "nginx", "h2o"])
    wanted = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    results = []
    try:
        for name, path, accept, levels, servers in SCENARIOS:
            if wanted and not any(w in name for w in wanted):
                continue
            row = {"scenario": name}
            for server_name in servers:
                work = os.path.join(tmp, f"{server_name}-{len(results)}")
                os.makedirs(work)
                if server_name == "peregrine":
                    srv = peregrine(work, docroot, fpm, args.peregrine, levels)
                elif server_name == "nginx":
                    srv = nginx(work, docroot, fpm, levels["gzip"])
                else:
                    srv = h2o(work, docroot, fpm, levels)
                try:
                    size, encoding, body = response_size(srv.port, path, accept)
                    if accept and encoding != accept:
                        raise RuntimeError(f"{server_name} {path} answered {encoding!r} to {accept}")
                    if encoding == "gzip" and zlib.decompress(body, 47) != page:
                        raise RuntimeError(f"{server_name} {path}: gzip body does not decode")
                    run_wrk(srv, path, accept, args.warmup)
                    samples = [run_wrk(srv, path, accept, args.duration) for _ in range(args.runs)]
                    us = statistics.median(s[0] for s in samples)
                    rps = statistics.median(s[1] for s in samples)
                    row[server_name] = (us, rps, size)
                    print(f"{name:24} {server_name:10} {us:8.1f} us/req  {rps:9.0f} req/s  "
                          f"{size:6} B  runs {[round(s[0], 1) for s in samples]}", flush=True)
                finally:
                    srv.stop()
            results.append(row)
    finally:
        fpm.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print("\n| scenario | Peregrine µs (B) | nginx µs (B) | H2O µs (B) |")
    print("|---|---:|---:|---:|")
    for row in results:
        cells = []
        for s in ("peregrine", "nginx", "h2o"):
            cells.append(f"{row[s][0]:.1f} ({row[s][2]})" if s in row else "–")
        print(f"| {row['scenario']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
