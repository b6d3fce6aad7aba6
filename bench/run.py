#!/usr/bin/env python3
"""Side-by-side benchmark: Peregrine vs nginx, H2O and lighttpd.

Not a pass/fail test: it prints figures (and optionally writes JSON).  See bench/README.md.

Method (docs/performance.md, DESIGN.md "Performance practice"):
  * every server: one worker, loopback, ephemeral port, generated config in a temp dir,
    pinned to CPU 0 (taskset -c 0); the load generator (wrk -t1) pinned to CPU 1;
  * per scenario and server: one 2 s warm-up, then N runs of --duration seconds, the servers'
    runs interleaved (run 1 of every server, then run 2, ...) so background noise hits all alike;
  * per run: requests/s, requests completed, errors, p99, and the server's CPU time per
    request, summed over all its processes and threads (schedstat, ns resolution; the
    utime+stime from /proc/PID/stat at CLK_TCK resolution is recorded alongside);
  * idle10k: RSS growth of the server with 10,000 idle keep-alive connections.

python3 stdlib only.  Only 127.0.0.1 is ever targeted.
"""

import argparse
import ctypes
import errno
import json
import os
import platform
import random
import re
import resource
import selectors
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PEREGRINE = "/work/main/build/release/peregrine"
REFERENCE_SERVERS = ("nginx", "h2o", "lighttpd")
ALL_SERVERS = ("peregrine",) + REFERENCE_SERVERS
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
SERVER_CPU = "0"
CLIENT_CPU = "1"
IDLE_CONNECTIONS = 10_000
HELLO_BODY = b"hello world"

# Docroot files: name -> size in bytes.
FILES = {"11.txt": 11, "663.html": 663, "135555.bin": 135_555}
PHP_SCRIPTS = {"hello.php": '<?php echo "hello world";\n', "info.php": "<?php phpinfo();\n"}

SCENARIOS = {
    # name: path, connections, Connection: close?, expected body length, description
    "small": dict(path="/11.txt", conns=100, close=False, length=11,
                  desc="11-byte file, 100 keep-alive connections"),
    "page": dict(path="/663.html", conns=100, close=False, length=663,
                 desc="663-byte page, 100 keep-alive connections"),
    "large": dict(path="/135555.bin", conns=100, close=False, length=135_555,
                  desc="135,555-byte file, 100 keep-alive connections"),
    "close": dict(path="/11.txt", conns=100, close=True, length=11,
                  desc="11-byte file, 100 connections, 'Connection: close' (new TCP connection per request)"),
    "c1000": dict(path="/663.html", conns=1000, close=False, length=663,
                  desc="663-byte page, 1,000 keep-alive connections"),
    "hello": dict(path="/hello", conns=100, close=False, length=len(HELLO_BODY),
                  desc="fixed 'return 200 hello world' route (no file system), 100 keep-alive connections"),
    "idle10k": dict(path="/11.txt", conns=IDLE_CONNECTIONS, close=False, length=11,
                    desc="server RSS growth with 10,000 idle keep-alive connections"),
    # Behind a back end (bench/README.md "Back ends"): php-fpm, or an nginx on CPU 1.
    "php_hello": dict(path="/hello.php", conns=100, close=False, length=len(HELLO_BODY), expect=HELLO_BODY,
                      backend="php", ab=True,
                      desc="PHP 'hello world' through php-fpm (8 static children, CPU 1), 100 keep-alive connections"),
    "php_info": dict(path="/info.php", conns=100, close=False, length=None, min_length=10_000,
                     backend="php",
                     desc="PHP phpinfo() page through php-fpm (8 static children, CPU 1), 100 keep-alive connections"),
    "proxy_small": dict(path="/663.html", conns=100, close=False, length=663, backend="http",
                        desc="reverse proxy of a 663-byte page from a back-end nginx (CPU 1), 100 keep-alive connections"),
}
# proxy_slow: a back end that holds every response SLOW_BACKEND_MS without burning CPU, at several
# concurrencies; "--scenarios proxy_slow" selects all of them.
SLOW_BACKEND_MS = 4
SLOW_CONCURRENCIES = (100, 500, 1000)
for _c in SLOW_CONCURRENCIES:
    SCENARIOS[f"proxy_slow{_c}"] = dict(
        path="/slow", conns=_c, close=False, length=len(HELLO_BODY), expect=HELLO_BODY, backend="http",
        desc=f"reverse proxy of a back end that answers after {SLOW_BACKEND_MS} ms, {_c:,} keep-alive connections")
SCENARIO_ORDER = list(SCENARIOS)
SCENARIO_ALIASES = {"proxy_slow": [f"proxy_slow{c}" for c in SLOW_CONCURRENCIES]}
PHP_FPM_CHILDREN = 8
AB_REQUESTS = 10_000
AB_CONCURRENCY = 100


class BenchError(Exception):
    pass


class ServerError(BenchError):
    pass


def log(msg=""):
    print(msg, flush=True)


def warn(msg):
    print("WARNING: " + msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Process helpers

_libc = None


def _child_setup():
    """preexec_fn for every child: die with us (best effort) even if we are SIGKILLed."""
    try:
        global _libc
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


class Reaper:
    """A watchdog process that SIGKILLs the registered server process groups if this script
    dies without cleaning up (even by SIGKILL: it notices EOF on its stdin pipe).  PDEATHSIG
    alone is not enough: nginx workers are forked by the master and would be orphaned."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--_reaper"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     start_new_session=True)

    def _send(self, line):
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def add(self, pgid):
        self._send(f"+{pgid}")

    def remove(self, pgid):
        self._send(f"-{pgid}")

    def close(self):
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


REAPER = None


def reaper_main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    groups = set()
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("+"):
            groups.add(int(line[1:]))
        elif line.startswith("-"):
            groups.discard(int(line[1:]))
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (max(hard, 65536), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            break
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def read_file(path, default=None):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return default


def proc_stat(pid):
    """Returns (ppid, pgrp, utime+stime ticks) or None."""
    s = read_file(f"/proc/{pid}/stat")
    if not s:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = s[s.rfind(")") + 2:].split()
    # rest[0] is field 3 (state); field N is rest[N-3].
    return int(rest[1]), int(rest[2]), int(rest[11]) + int(rest[12])


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def tail(path, n=40):
    text = read_file(path, "")
    lines = text.splitlines()
    return "\n".join(lines[-n:])


def run_cmd(cmd, timeout, **kw):
    """subprocess.run with a timeout, in its own process group that is killed on timeout."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=_child_setup, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p.pid)
        p.communicate()
        raise BenchError(f"timed out after {timeout}s: {shlex.join(cmd)}")
    finally:
        if p.poll() is None:
            kill_group(p.pid)
            p.wait()
    return p.returncode, out, err


def group_members(pgid):
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st and st[1] == pgid:
            out.append(pid)
    return out


def kill_group(pgid, grace=3.0):
    """SIGTERM the process group, wait up to `grace` s, then SIGKILL whatever is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        end = time.monotonic() + wait
        while time.monotonic() < end:
            # reap our own child if it is one, so it does not stay a zombie in the group
            try:
                os.waitpid(-pgid, os.WNOHANG)
            except ChildProcessError:
                pass
            alive = [p for p in group_members(pgid)
                     if (read_file(f"/proc/{p}/stat", "") or "").split(") ")[-1][:1] not in ("Z", "")]
            if not alive:
                return
            time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# Servers


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=5.0, headers=None):
    """Minimal HTTP/1.1 GET on a fresh connection; returns (status, headers dict, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        hdrs = {"Host": f"127.0.0.1:{port}", "Connection": "close"}
        hdrs.update(headers or {})
        req = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        s.sendall(req.encode())
        data = bytearray()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, sep, body = bytes(data).partition(b"\r\n\r\n")
    if not sep:
        raise BenchError(f"malformed response to GET {path}: {bytes(data[:200])!r}")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    h = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        h[k.strip().lower()] = v.strip()
    if "chunked" in h.get("transfer-encoding", "").lower():
        body = dechunk(body)
    return status, h, body


def dechunk(body):
    out = bytearray()
    while body:
        line, _, body = body.partition(b"\r\n")
        n = int(line.split(b";")[0], 16)
        if n == 0:
            break
        out += body[:n]
        body = body[n + 2:]
    return bytes(out)


class Server:
    name = "?"
    binary = None

    def __init__(self, workdir, docroot, nofile):
        self.workdir = workdir
        self.docroot = docroot
        self.nofile = nofile
        self.proc = None
        self.port = None
        self.cmd = None
        self.config_path = None
        self.scenario = None  # the scenario name: decides the routes of the generated config
        self.backend = None  # PhpFpm or BackendNginx for scenarios that have a back end
        self.body_sizes = {}  # path -> body bytes of the start-up check (phpinfo() varies by server)
        self.stdout_path = os.path.join(workdir, "stdout.log")
        self.stderr_path = os.path.join(workdir, "stderr.log")

    # -- capabilities
    @classmethod
    def available(cls, args):
        """(ok, reason)"""
        b = cls.binary_path(args)
        if not b or not (os.path.isfile(b) and os.access(b, os.X_OK)):
            return False, f"binary not found: {b or cls.name}"
        return True, ""

    @classmethod
    def binary_path(cls, args):
        return shutil.which(cls.binary) if cls.binary else None

    @classmethod
    def version(cls, args):
        return "?"

    @classmethod
    def supports(cls, scenario):
        """(ok, reason)"""
        return True, ""

    def backend_kind(self):
        """None, "php" or "http": what the generated config must route to."""
        return SCENARIOS[self.scenario].get("backend") if self.scenario else None

    # -- lifecycle
    def error_logs(self):
        return [self.stderr_path, self.stdout_path]

    def make_command(self, args):
        raise NotImplementedError

    def start(self, args, check_paths, attempts=3):
        os.makedirs(self.workdir, exist_ok=True)
        for attempt in range(attempts):
            # free_port() is racy (the port is free when we look, another process may take it
            # before the server binds): retry with a new port if the bind failed.
            self.port = free_port()
            self.cmd = ["taskset", "-c", SERVER_CPU] + self.make_command(args)
            out = open(self.stdout_path, "ab")
            err = open(self.stderr_path, "ab")
            try:
                self.proc = subprocess.Popen(self.cmd, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=err, start_new_session=True,
                                             preexec_fn=_child_setup)
            finally:
                out.close()
                err.close()
            if REAPER:
                REAPER.add(self.proc.pid)
            try:
                self.wait_ready(check_paths)
                return
            except ServerError as e:
                self.stop()
                if attempt + 1 < attempts and "in use" in str(e).lower():
                    continue
                raise

    def diagnostics(self):
        parts = [f"command: {shlex.join(self.cmd or [])}", f"config/work dir: {self.workdir}"]
        if self.config_path:
            parts.append(f"--- {self.config_path} ---\n{read_file(self.config_path, '').rstrip()}")
        for p in self.error_logs():
            t = tail(p)
            if t:
                parts.append(f"--- {p} ---\n{t}")
        if self.backend:
            parts.append(f"--- back end ({self.backend.name}) ---\n{self.backend.diagnostics()}")
        return "\n".join(parts)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, check_paths, timeout=15.0):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            if not self.alive():
                raise ServerError(f"{self.name} exited during start-up (status {self.proc.returncode})\n"
                                  + self.diagnostics())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError as e:
                last = e
                time.sleep(0.05)
        else:
            raise ServerError(f"{self.name} did not accept connections on 127.0.0.1:{self.port} within "
                              f"{timeout}s ({last})\n" + self.diagnostics())
        # Sanity: every path we will benchmark answers 200 with the expected body.
        # length None: any body of at least min_length bytes (phpinfo() differs between servers).
        for path, length, expect, min_length in check_paths:
            try:
                status, _, body = http_get(self.port, path)
            except (OSError, BenchError) as e:
                raise ServerError(f"{self.name}: GET {path} failed: {e}\n" + self.diagnostics())
            self.body_sizes[path] = len(body)
            size_ok = len(body) == length if length is not None else len(body) >= min_length
            if status != 200 or not size_ok or (expect is not None and body != expect):
                want = f"{length} bytes" if length is not None else f">= {min_length} bytes"
                raise ServerError(f"{self.name}: GET {path} -> status {status}, {len(body)} bytes "
                                  f"(want 200, {want}): {body[:80]!r}\n" + self.diagnostics())

    def pids(self):
        """All processes of the server: its process group plus any descendants that left it."""
        if self.proc is None:
            return []
        root = self.proc.pid
        table = {}
        for pid in all_pids():
            st = proc_stat(pid)
            if st:
                table[pid] = st
        members = {p for p, st in table.items() if st[1] == root}
        if root in table:
            members.add(root)
        changed = True
        while changed:
            changed = False
            for p, st in table.items():
                if p not in members and st[0] in members:
                    members.add(p)
                    changed = True
        return sorted(members)

    def cpu_sample(self):
        """(schedstat ns summed over all threads of all processes, stat ticks summed, times a
        thread was put on the CPU summed: mostly wake-ups, each costly on a VM)."""
        ns = 0
        ticks = 0
        slices = 0
        for pid in self.pids():
            st = proc_stat(pid)
            if st:
                ticks += st[2]
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                s = read_file(f"/proc/{pid}/task/{tid}/schedstat")
                if s:
                    fields = s.split()
                    ns += int(fields[0])
                    slices += int(fields[2])
        return ns, ticks, slices

    def rss_kb(self):
        """(sum VmRSS, sum VmHWM) in kB over the server's processes."""
        rss = hwm = 0
        for pid in self.pids():
            s = read_file(f"/proc/{pid}/status", "")
            for line in s.splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm += int(line.split()[1])
        return rss, hwm

    def rss_breakdown(self):
        """[(pid, comm, VmRSS kB)] for the JSON: shows what the total is made of (e.g. nginx's
        master, h2o's annotate-backtrace-symbols perl helper)."""
        out = []
        for pid in self.pids():
            comm = (read_file(f"/proc/{pid}/comm", "?") or "?").strip()
            rss = 0
            for line in (read_file(f"/proc/{pid}/status", "") or "").splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            out.append((pid, comm, rss))
        return out

    def stop(self):
        if self.proc is None:
            return
        kill_group(self.proc.pid)
        # anything that left the group (e.g. setsid()) but is still our descendant
        for pid in self.pids():
            if pid != self.proc.pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if REAPER:
            REAPER.remove(self.proc.pid)
        self.proc = None

    def write(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        if name.endswith((".conf", ".toml")):
            self.config_path = path
        return path


# Debian's /etc/nginx/fastcgi_params plus SCRIPT_FILENAME, written out so the config stands alone.
NGINX_FASTCGI_PARAMS = (
    ("SCRIPT_FILENAME", "$document_root$fastcgi_script_name"),
    ("QUERY_STRING", "$query_string"),
    ("REQUEST_METHOD", "$request_method"),
    ("CONTENT_TYPE", "$content_type"),
    ("CONTENT_LENGTH", "$content_length"),
    ("SCRIPT_NAME", "$fastcgi_script_name"),
    ("REQUEST_URI", "$request_uri"),
    ("DOCUMENT_URI", "$document_uri"),
    ("DOCUMENT_ROOT", "$document_root"),
    ("SERVER_PROTOCOL", "$server_protocol"),
    ("REQUEST_SCHEME", "$scheme"),
    ("HTTPS", "$https if_not_empty"),
    ("GATEWAY_INTERFACE", "CGI/1.1"),
    ("SERVER_SOFTWARE", "nginx/$nginx_version"),
    ("REMOTE_ADDR", "$remote_addr"),
    ("REMOTE_PORT", "$remote_port"),
    ("REMOTE_USER", "$remote_user"),
    ("SERVER_ADDR", "$server_addr"),
    ("SERVER_PORT", "$server_port"),
    ("SERVER_NAME", "$server_name"),
    ("REDIRECT_STATUS", "200"),
)


class Nginx(Server):
    name = "nginx"
    binary = "nginx"

    @classmethod
    def version(cls, args):
        rc, out, err = run_cmd([cls.binary_path(args), "-v"], 10)
        return (err or out).strip().split("/")[-1]

    def error_logs(self):
        return [os.path.join(self.workdir, "error.log")] + super().error_logs()

    def backend_blocks(self):
        """(upstream blocks, location blocks) for scenarios with a back end."""
        kind = self.backend_kind()
        if kind == "php":
            # keepalive = php-fpm's children: a child stays with a kept-alive connection, so more
            # idle connections than children could never all be served.
            params = "".join(f"            fastcgi_param {k} {v};\n" for k, v in NGINX_FASTCGI_PARAMS)
            upstream = f"""    upstream php {{
        server unix:{self.backend.socket_for(self.name)};
        keepalive {PHP_FPM_CHILDREN};
    }}
"""
            location = f"""        location ~ \\.php$ {{
            fastcgi_pass php;
            fastcgi_keep_conn on;
{params}        }}
"""
            return upstream, location
        if kind == "http":
            upstream = f"""    upstream app {{
        server 127.0.0.1:{self.backend.port};
        keepalive 32;
    }}
"""
            location = """        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
"""
            return upstream, location
        return "", ""

    def make_command(self, args):
        w = self.workdir
        user = "user root root;\n" if os.geteuid() == 0 else ""
        upstreams, locations = self.backend_blocks()
        conf = f"""# generated by bench/run.py
{user}worker_processes 1;
worker_rlimit_nofile {self.nofile};
daemon off;
master_process on;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{
    worker_connections 20000;
}}
http {{
    access_log off;
    sendfile on;
    open_file_cache max=1000;
    types {{
        text/plain txt;
        text/html html;
        application/octet-stream bin;
    }}
    default_type application/octet-stream;
    client_body_temp_path {w}/client_body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
{upstreams}    server {{
        listen 127.0.0.1:{self.port};
        root {self.docroot};
        location = /hello {{
            return 200 "hello world";
        }}
{locations}    }}
}}
"""
        path = self.write("nginx.conf", conf)
        return [self.binary_path(args), "-p", w + "/", "-e", f"{w}/error.log", "-c", path]


class H2O(Server):
    name = "h2o"
    binary = "h2o"
    _mruby = None

    @classmethod
    def version(cls, args):
        rc, out, err = run_cmd([cls.binary_path(args), "-v"], 10)
        first = (out or err).splitlines()[0] if (out or err) else "?"
        return first.replace("h2o version ", "")

    @classmethod
    def has_mruby(cls):
        if cls._mruby is None:
            try:
                rc, out, err = run_cmd([shutil.which(cls.binary), "-v"], 10)
                cls._mruby = bool(re.search(r"mruby:\s*YES", out + err))
            except (BenchError, OSError, TypeError):
                cls._mruby = False
        return cls._mruby

    @classmethod
    def supports(cls, scenario):
        if scenario == "hello" and not cls.has_mruby():
            return False, "h2o built without mruby: no way to return a fixed body"
        return True, ""

    def error_logs(self):
        return [os.path.join(self.workdir, "error.log")] + super().error_logs()

    def make_command(self, args):
        w = self.workdir
        user = "user: root\n" if os.geteuid() == 0 else ""
        hello = ""
        if self.has_mruby():
            hello = ('      /hello:\n'
                     '        mruby.handler: proc {|env| [200, {}, ["hello world"]]}\n')
        kind = self.backend_kind()
        if kind == "http":
            # h2o keeps upstream connections alive by default (proxy.timeout.keepalive 2 s).
            root = f"""      /:
        proxy.reverse.url: http://127.0.0.1:{self.backend.port}/
"""
        elif kind == "php":
            # fastcgi.timeout.keepalive is left at its default, 0: a new connection per request.
            root = f"""      /:
        file.dir: {self.docroot}
        file.custom-handler:
          extension: .php
          fastcgi.connect:
            port: {self.backend.socket_for(self.name)}
            type: unix
"""
        else:
            root = f"""      /:
        file.dir: {self.docroot}
"""
        # http1-request-timeout is also h2o's keep-alive idle timeout (default 10 s): raised so
        # the idle10k connections are not closed while we measure.
        conf = f"""# generated by bench/run.py
{user}num-threads: 1
max-connections: 20000
http1-request-timeout: 120
pid-file: {w}/h2o.pid
error-log: {w}/error.log
listen:
  host: 127.0.0.1
  port: {self.port}
file.mime.settypes:
  text/plain: .txt
  text/html: .html
  application/octet-stream: .bin
hosts:
  default:
    paths:
{hello}{root}"""
        path = self.write("h2o.conf", conf)
        return [self.binary_path(args), "-c", path]


class Lighttpd(Server):
    name = "lighttpd"
    binary = "lighttpd"

    @classmethod
    def version(cls, args):
        rc, out, err = run_cmd([cls.binary_path(args), "-v"], 10)
        return (out or err).strip().split(" ")[0].replace("lighttpd/", "")

    @classmethod
    def magnet_available(cls):
        dirs = ["/usr/lib/lighttpd", "/usr/lib/x86_64-linux-gnu/lighttpd", "/usr/local/lib/lighttpd"]
        return any(os.path.exists(os.path.join(d, "mod_magnet.so")) for d in dirs)

    @classmethod
    def supports(cls, scenario):
        if scenario == "hello" and not cls.magnet_available():
            return False, ("mod_magnet (Lua) is not installed (Debian package lighttpd-modules-lua); "
                           "lighttpd has no other way to return a fixed body")
        if scenario.startswith("proxy_slow"):
            return False, "not part of the proxy_slow comparison (Peregrine, nginx, H2O)"
        return True, ""

    def error_logs(self):
        return [os.path.join(self.workdir, "error.log")] + super().error_logs()

    def backend_config(self):
        kind = self.backend_kind()
        if kind == "php":
            # lighttpd's mod_fastcgi opens a new connection to php-fpm per request.
            return ('server.modules += ("mod_fastcgi")\n'
                    f'fastcgi.server = (".php" => (("socket" => "{self.backend.socket_for(self.name)}", '
                    '"check-local" => "enable")))\n')
        if kind == "http":
            # lighttpd's mod_proxy opens a new connection to the back end per request.
            return ('server.modules += ("mod_proxy")\n'
                    f'proxy.server = ("" => (("host" => "127.0.0.1", "port" => {self.backend.port})))\n')
        return ""

    def make_command(self, args):
        w = self.workdir
        max_fds = min(self.nofile, 65535)
        # lighttpd caps max-connections at max-fds/2.
        max_conns = min(20000, max_fds // 2)
        magnet = ""
        # Only where it is measured: the Lua script would otherwise run on every request.
        if self.scenario == "hello" and self.magnet_available():
            lua = self.write("hello.lua",
                             'if lighty.r.req_attr["uri.path"] == "/hello" then\n'
                             '  lighty.r.resp_body:set("hello world")\n'
                             '  return 200\n'
                             'end\n')
            magnet = f'server.modules += ("mod_magnet")\nmagnet.attract-physical-path-to = ("{lua}")\n'
        conf = f"""# generated by bench/run.py
server.document-root = "{self.docroot}"
server.bind = "127.0.0.1"
server.port = {self.port}
server.max-worker = 0
server.pid-file = "{w}/lighttpd.pid"
server.errorlog = "{w}/error.log"
server.network-backend = "sendfile"
server.max-fds = {max_fds}
server.max-connections = {max_conns}
# default keep-alive idle timeout is 5 s: raised so the idle10k connections survive the measurement
server.max-keep-alive-idle = 120
server.max-read-idle = 120
server.upload-dirs = ("{w}")
mimetype.assign = (".txt" => "text/plain", ".html" => "text/html", ".bin" => "application/octet-stream")
{magnet}{self.backend_config()}"""
        path = self.write("lighttpd.conf", conf)
        return [self.binary_path(args), "-D", "-f", path]


class Peregrine(Server):
    name = "peregrine"
    fingerprints = []  # one entry per distinct binary seen while running (it may be rebuilt meanwhile)

    @classmethod
    def fingerprint(cls, path):
        import hashlib
        st = os.stat(path)
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return {"path": path, "sha256": h.hexdigest()[:16], "size": st.st_size,
                "mtime": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(st.st_mtime))}

    def start(self, args, check_paths, attempts=3):
        fp = self.fingerprint(self.binary_path(args))
        if not self.fingerprints or fp["sha256"] != self.fingerprints[-1]["sha256"]:
            if self.fingerprints:
                warn(f"peregrine binary changed during the run (now sha256 {fp['sha256']}, "
                     f"built {fp['mtime']}): later scenarios measure a different build")
            self.fingerprints.append(fp)
        super().start(args, check_paths, attempts)

    @classmethod
    def binary_path(cls, args):
        return args.peregrine

    @classmethod
    def version(cls, args):
        for flag in ("--version", "-v"):
            try:
                rc, out, err = run_cmd([cls.binary_path(args), flag], 10)
            except (BenchError, OSError):
                continue
            text = (out or err).strip()
            if rc == 0 and text:
                return text.splitlines()[0]
        return "?"

    def error_logs(self):
        return [os.path.join(self.workdir, "error.log")] + super().error_logs()

    def make_command(self, args):
        w = self.workdir
        kind = self.backend_kind()
        upstreams = ""
        routes = '[[site.route]]\nprefix = "/"\n'
        if kind == "php":
            upstreams = f"""
[[upstream]]
name = "php"
keepalive = 32

[[upstream.server]]
address = "unix:{self.backend.socket_for(self.name)}"
max_conns = {PHP_FPM_CHILDREN}
"""
            routes = '[[site.route]]\nextension = "php"\nfastcgi = "php"\n\n' + routes
        elif kind == "http":
            upstreams = f"""
[[upstream]]
name = "app"
servers = ["127.0.0.1:{self.backend.port}"]
"""
            routes = '[[site.route]]\nprefix = "/"\nproxy = "http://app"\n'
        conf = f"""# generated by bench/run.py
listen = ["127.0.0.1:{self.port}"]
workers = 1
error_log = "{w}/error.log"
{upstreams}
[[site]]
root = "{self.docroot}"
access_log = "off"

[[site.route]]
exact = "/hello"
return = 200
body = "hello world"

{routes}"""
        path = self.write("peregrine.toml", conf)
        return [self.binary_path(args), "-c", path]


# --------------------------------------------------------------------------------------------
# Back ends (php_*, proxy_*): started once per scenario, shared by the servers of that scenario,
# pinned to the client's CPU so that CPU 0 measures only the server under test.

SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])
NGINX_ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


class BackendError(BenchError):
    pass


class Backend:
    name = "?"

    def __init__(self, workdir):
        self.workdir = workdir
        self.proc = None
        self.cmd = None
        self.log_paths = [os.path.join(workdir, "stderr.log")]

    def diagnostics(self):
        parts = [f"command: {shlex.join(self.cmd or [])}", f"work dir: {self.workdir}"]
        for p in self.log_paths:
            t = tail(p)
            if t:
                parts.append(f"--- {p} ---\n{t}")
        return "\n".join(parts)

    def spawn(self, cmd):
        os.makedirs(self.workdir, exist_ok=True)
        self.cmd = ["taskset", "-c", CLIENT_CPU] + cmd
        with open(os.path.join(self.workdir, "stderr.log"), "ab") as err:
            self.proc = subprocess.Popen(self.cmd, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err, start_new_session=True,
                                         preexec_fn=_child_setup)
        if REAPER:
            REAPER.add(self.proc.pid)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_until(self, ready, what, timeout=15.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.alive():
                raise BackendError(f"{self.name} exited during start-up (status {self.proc.returncode})\n"
                                   + self.diagnostics())
            if ready():
                return
            time.sleep(0.05)
        raise BackendError(f"{self.name}: {what} not ready within {timeout}s\n" + self.diagnostics())

    def stop(self):
        if self.proc is None:
            return
        kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if REAPER:
            REAPER.remove(self.proc.pid)
        self.proc = None


class PhpFpm(Backend):
    """php-fpm with one pool per web server, each `pm = static` with PHP_FPM_CHILDREN children.

    One pool per server because a php-fpm child serves one connection at a time and stays with a
    kept-alive (FCGI_KEEP_CONN) connection while it is idle: servers sharing a pool would take
    children from each other even while they are not measured."""
    name = "php-fpm"
    BINARIES = ("php-fpm8.2", "php-fpm")

    @classmethod
    def binary_path(cls):
        for b in cls.BINARIES:
            path = shutil.which(b, path=SBIN_PATH)
            if path:
                return path
        return None

    @classmethod
    def available(cls):
        if not cls.binary_path():
            return False, "php-fpm8.2 not found (Debian package php8.2-fpm)"
        return True, ""

    @classmethod
    def version(cls):
        rc, out, err = run_cmd([cls.binary_path(), "-v"], 10)
        return (out or err).split("\n")[0].strip()

    def socket_for(self, server_name):
        return os.path.join(self.workdir, f"{server_name}.sock")

    def start(self, server_names):
        w = self.workdir
        os.makedirs(w, exist_ok=True)
        self.log_paths = [os.path.join(w, "php-fpm.log"), os.path.join(w, "stderr.log")]
        user = "user = root\ngroup = root\n" if os.geteuid() == 0 else ""
        pools = "".join(f"""
[{n}]
{user}listen = {self.socket_for(n)}
listen.mode = 0666
pm = static
pm.max_children = {PHP_FPM_CHILDREN}
pm.max_requests = 0
php_admin_value[error_log] = {w}/php-errors.log
""" for n in server_names)
        conf = f"""; generated by bench/run.py
[global]
pid = {w}/php-fpm.pid
error_log = {w}/php-fpm.log
daemonize = no
{pools}"""
        path = os.path.join(w, "php-fpm.conf")
        with open(path, "w") as f:
            f.write(conf)
        # -F: stay in the foreground (our process group); -R: pools may run as root (the temp
        # docroot is readable by root only when we are root).
        self.spawn([self.binary_path(), "-F", "-y", path] + (["-R"] if os.geteuid() == 0 else []))

        def sockets_accept():
            for n in server_names:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(0.5)
                    try:
                        s.connect(self.socket_for(n))
                    except OSError:
                        return False
            return True

        self.wait_until(sockets_accept, "pool sockets")


class BackendNginx(Backend):
    """An nginx with one worker serving the docroot (/663.html) and, with the echo module,
    /slow: "hello world" after SLOW_BACKEND_MS ms on a timer (echo_sleep), burning no CPU."""
    name = "back-end nginx"

    @classmethod
    def available(cls, need_echo):
        if not shutil.which("nginx", path=SBIN_PATH):
            return False, "nginx not found (Debian package nginx-light)"
        if need_echo and not os.path.exists(NGINX_ECHO_MODULE):
            return False, f"{NGINX_ECHO_MODULE} not found (Debian package libnginx-mod-http-echo)"
        return True, ""

    def start(self, docroot, nofile, need_echo):
        w = self.workdir
        os.makedirs(w, exist_ok=True)
        self.log_paths = [os.path.join(w, "error.log"), os.path.join(w, "stderr.log")]
        self.port = free_port()
        user = "user root root;\n" if os.geteuid() == 0 else ""
        load = f"load_module {NGINX_ECHO_MODULE};\n" if need_echo else ""
        slow = ""
        if need_echo:
            slow = f"""        location = /slow {{
            default_type text/plain;
            echo_sleep {SLOW_BACKEND_MS / 1000:.3f};
            echo -n "{HELLO_BODY.decode()}";
        }}
"""
        # backlog: at 1,000 client connections a proxy may open 1,000 upstream connections at
        # once; the default (511) would drop SYNs and add 1 s retransmits to the proxy's p99.
        conf = f"""# generated by bench/run.py (back end)
{load}{user}worker_processes 1;
worker_rlimit_nofile {nofile};
daemon off;
master_process on;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{
    worker_connections 20000;
}}
http {{
    access_log off;
    sendfile on;
    open_file_cache max=1000;
    types {{
        text/html html;
    }}
    default_type application/octet-stream;
    client_body_temp_path {w}/client_body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
        root {docroot};
{slow}    }}
}}
"""
        path = os.path.join(w, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.spawn([shutil.which("nginx", path=SBIN_PATH), "-p", w + "/", "-e", f"{w}/error.log", "-c", path])

        def answers():
            try:
                status, _, body = http_get(self.port, "/663.html", timeout=1.0)
                if status != 200 or len(body) != 663:
                    raise BackendError(f"{self.name}: GET /663.html -> {status}, {len(body)} bytes\n"
                                       + self.diagnostics())
                if need_echo:
                    status, _, body = http_get(self.port, "/slow", timeout=1.0)
                    if status != 200 or body != HELLO_BODY:
                        raise BackendError(f"{self.name}: GET /slow -> {status}, {body[:80]!r}\n"
                                           + self.diagnostics())
                return True
            except OSError:
                return False

        self.wait_until(answers, f"127.0.0.1:{self.port}")


def backend_available(scenario):
    """(ok, reason) for the back end a scenario needs."""
    kind = SCENARIOS[scenario].get("backend")
    if kind == "php":
        return PhpFpm.available()
    if kind == "http":
        return BackendNginx.available(need_echo=SCENARIOS[scenario]["path"] == "/slow")
    return True, ""


def start_backend(scenario, workdir, ctx, server_names):
    kind = SCENARIOS[scenario].get("backend")
    if kind is None:
        return None
    if kind == "php":
        b = PhpFpm(workdir)
        starter = lambda: b.start(server_names)
    else:
        b = BackendNginx(workdir)
        starter = lambda: b.start(ctx["docroot"], ctx["nofile"], SCENARIOS[scenario]["path"] == "/slow")
    try:
        starter()
    except BaseException:
        b.stop()
        raise
    return b


SERVER_CLASSES = {"peregrine": Peregrine, "nginx": Nginx, "h2o": H2O, "lighttpd": Lighttpd}


# --------------------------------------------------------------------------------------------
# wrk

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise BenchError(f"cannot parse wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out):
    r = {}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise BenchError("wrk output has no Requests/sec line:\n" + out)
    r["rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+),", out)
    r["requests"] = int(m.group(1))
    r["wrk_seconds"] = to_ms(m.group(2) + m.group(3)) / 1e3
    pct = {}
    for pm in re.finditer(r"^\s+(\d+)%\s+([\d.]+\w+)\s*$", out, re.M):
        pct[int(pm.group(1))] = to_ms(pm.group(2))
    r["p50_ms"] = pct.get(50)
    r["p99_ms"] = pct.get(99)
    se = {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        se = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups())))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    non2xx = int(m.group(1)) if m else 0
    r["socket_errors"] = se
    r["non_2xx_3xx"] = non2xx
    r["errors"] = sum(se.values()) + non2xx
    return r


def wrk_command(port, sc, duration):
    cmd = ["taskset", "-c", CLIENT_CPU, "wrk", "-t1", f"-c{sc['conns']}", f"-d{duration}s", "--latency"]
    if sc["close"]:
        cmd += ["-H", "Connection: close"]
    cmd.append(f"http://127.0.0.1:{port}{sc['path']}")
    return cmd


def cpu_times():
    """Per-CPU (busy, total) jiffies from /proc/stat."""
    out = {}
    for line in read_file("/proc/stat", "").splitlines():
        if re.match(r"cpu\d+ ", line):
            f = line.split()
            vals = list(map(int, f[1:]))
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            total = sum(vals[:8])
            out[f[0]] = (total - idle, total)
    return out


def cpu_busy(before, after, cpu):
    b0, t0 = before.get(cpu, (0, 0))
    b1, t1 = after.get(cpu, (0, 0))
    return (b1 - b0) / (t1 - t0) if t1 > t0 else None


def wrk_run(server, sc, duration):
    cmd = wrk_command(server.port, sc, duration)
    if not server.alive():
        raise ServerError(f"{server.name} is no longer running\n" + server.diagnostics())
    cpu0 = cpu_times()
    ns0, t0, s0 = server.cpu_sample()
    w0 = time.monotonic()
    rc, out, err = run_cmd(cmd, timeout=duration + 60)
    w1 = time.monotonic()
    ns1, t1, s1 = server.cpu_sample()
    cpu1 = cpu_times()
    if rc != 0:
        raise BenchError(f"wrk failed (exit {rc}): {shlex.join(cmd)}\n{out}\n{err}")
    if not server.alive():
        raise ServerError(f"{server.name} died during: {shlex.join(cmd)}\n" + server.diagnostics())
    r = parse_wrk(out)
    r["cmd"] = shlex.join(cmd)
    r["wall_s"] = w1 - w0
    r["cpu_ns"] = ns1 - ns0
    r["cpu_ticks"] = t1 - t0
    n = r["requests"]
    r["cpu_us_per_req"] = (ns1 - ns0) / 1e3 / n if n else None
    r["cpu_us_per_req_ticks"] = (t1 - t0) * 1e6 / CLK_TCK / n if n else None
    r["runs_per_req"] = (s1 - s0) / n if n else None
    r["server_cpu_util"] = (ns1 - ns0) / 1e9 / (w1 - w0)
    r["cpu0_busy"] = cpu_busy(cpu0, cpu1, "cpu" + SERVER_CPU)
    r["cpu1_busy"] = cpu_busy(cpu0, cpu1, "cpu" + CLIENT_CPU)
    if err.strip():
        r["wrk_stderr"] = err.strip()
    return r


def parse_ab(out, err):
    def num(pattern, conv=int):
        m = re.search(pattern, out)
        return conv(m.group(1)) if m else None
    r = {
        "complete": num(r"Complete requests:\s+(\d+)"),
        "failed": num(r"Failed requests:\s+(\d+)"),
        "keep_alive": num(r"Keep-Alive requests:\s+(\d+)"),
        "non_2xx": num(r"Non-2xx responses:\s+(\d+)") or 0,
        "rps": num(r"Requests per second:\s+([\d.]+)", float),
    }
    if r["complete"] is None:
        # ab gave up (e.g. "apr_pollset_poll: The timeout specified has expired") before its report:
        # it only says how many requests it had completed by then.
        m = re.search(r"Total of (\d+) requests completed", out + err)
        r["complete"] = int(m.group(1)) if m else 0
    return r


def ab_run(server, sc, timeout):
    """One `ab -k` run (HTTP/1.0 keep-alive): did the server keep the connections alive?"""
    url = f"http://127.0.0.1:{server.port}{sc['path']}"
    cmd = ["taskset", "-c", CLIENT_CPU, "ab", "-k", "-n", str(AB_REQUESTS), "-c", str(AB_CONCURRENCY),
           "-s", str(timeout), url]
    if not shutil.which("ab"):
        return {"cmd": shlex.join(cmd), "complete": None, "failed": None, "keep_alive": None,
                "non_2xx": None, "rps": None, "problem": "ab not found (Debian package apache2-utils)"}
    t0 = time.monotonic()
    rc, out, err = run_cmd(cmd, timeout=timeout + 120)
    r = parse_ab(out, err)
    r["cmd"] = shlex.join(cmd)
    r["exit_status"] = rc
    r["wall_s"] = round(time.monotonic() - t0, 2)
    if rc != 0:
        last = [line for line in err.strip().splitlines() if line.strip()]
        r["problem"] = f"ab exit {rc}: {last[-1] if last else '?'}"
    if not server.alive():
        raise ServerError(f"{server.name} died during: {shlex.join(cmd)}\n" + server.diagnostics())
    return r


# --------------------------------------------------------------------------------------------
# idle10k client (runs as a separate process pinned to CPU 1: run.py --_idle-client ...)


def idle_client(port, count, path, length, window=256, timeout=120.0):
    raise_nofile()
    sel = selectors.DefaultSelector()
    req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
           f"User-Agent: peregrine-bench-idle\r\n\r\n").encode()
    done = []
    stats = {"ok": 0, "connect_failed": 0, "bad_response": 0, "closed_early": 0, "conn_close_hdr": 0}
    started = inflight = 0
    t0 = time.monotonic()
    deadline = t0 + timeout

    def fail(st, what):
        nonlocal inflight
        stats[what] += 1
        inflight -= 1
        try:
            sel.unregister(st["sock"])
        except (KeyError, ValueError):
            pass
        st["sock"].close()

    while (started < count or inflight) and time.monotonic() < deadline:
        while inflight < window and started < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            started += 1
            e = s.connect_ex(("127.0.0.1", port))
            if e not in (0, errno.EINPROGRESS):
                stats["connect_failed"] += 1
                s.close()
                continue
            inflight += 1
            sel.register(s, selectors.EVENT_WRITE, {"sock": s, "phase": "connect", "out": req,
                                                    "buf": bytearray()})
        for key, _ in sel.select(timeout=0.5):
            st = key.data
            s = st["sock"]
            try:
                if st["phase"] == "connect":
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        fail(st, "connect_failed")
                        continue
                    st["phase"] = "send"
                if st["phase"] == "send":
                    n = s.send(st["out"])
                    st["out"] = st["out"][n:]
                    if not st["out"]:
                        st["phase"] = "recv"
                        sel.modify(s, selectors.EVENT_READ, st)
                    continue
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                fail(st, "connect_failed" if st["phase"] != "recv" else "closed_early")
                continue
            if not data:
                fail(st, "closed_early")
                continue
            buf = st["buf"]
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = buf[:end].decode("latin-1").lower()
            clen = re.search(r"\r\ncontent-length:\s*(\d+)", head)
            if not head.startswith("http/1.1 200") or not clen or int(clen.group(1)) != length:
                fail(st, "bad_response")
                continue
            if len(buf) < end + 4 + int(clen.group(1)):
                continue
            if re.search(r"\r\nconnection:\s*close", head):
                stats["conn_close_hdr"] += 1
            sel.unregister(s)
            inflight -= 1
            done.append(s)
            stats["ok"] += 1
            st["buf"] = None
    stats["unfinished"] = inflight
    stats["open_seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(stats), flush=True)
    # Idle until the parent has measured, then report how many are still open, then close all.
    sys.stdin.readline()
    still = closed = 0
    for s in done:
        try:
            d = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            if d:
                still += 1  # unexpected data, but open
            else:
                closed += 1
        except BlockingIOError:
            still += 1
        except OSError:
            closed += 1
    print(json.dumps({"still_open": still, "closed_by_server": closed}), flush=True)
    for s in done:
        s.close()


def read_json_line(proc, timeout, _pending={}):
    """Read one JSON line from proc.stdout within timeout."""
    fd = proc.stdout.fileno()
    buf = _pending.pop(fd, b"")
    end = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = end - time.monotonic()
            if left <= 0:
                raise BenchError(f"idle client: no answer within {timeout}s (got {buf[:200]!r})")
            if sel.select(timeout=left):
                chunk = os.read(fd, 4096)
                if not chunk:
                    err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
                    raise BenchError(f"idle client exited without answering (got {buf[:200]!r})\n{err}")
                buf += chunk
    line, _, rest = buf.partition(b"\n")
    if rest:
        _pending[fd] = rest
    return json.loads(line)


def idle_run(server, sc):
    """One idle10k measurement on a freshly started server.  Returns a dict."""
    time.sleep(0.5)
    rss0, _ = server.rss_kb()
    procs0 = server.rss_breakdown()
    cmd = ["taskset", "-c", CLIENT_CPU, sys.executable, os.path.abspath(__file__), "--_idle-client",
           "--_port", str(server.port), "--_count", str(sc["conns"]), "--_path", sc["path"],
           "--_length", str(sc["length"])]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=_child_setup)
    try:
        stats = read_json_line(p, 180)
        time.sleep(1.0)
        rss1, _ = server.rss_kb()
        procs1 = server.rss_breakdown()
        ns0, _, _ = server.cpu_sample()
        time.sleep(1.0)
        ns1, _, _ = server.cpu_sample()
        p.stdin.write(b"check\n")
        p.stdin.flush()
        check = read_json_line(p, 60)
        p.stdin.close()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        err = p.stderr.read().decode(errors="replace").strip()
    finally:
        if p.poll() is None:
            kill_group(p.pid)
        p.wait()
    if not server.alive():
        raise ServerError(f"{server.name} died during idle10k\n" + server.diagnostics())
    r = dict(stats)
    r.update(check)
    r["cmd"] = shlex.join(cmd)
    r["rss_before_kb"] = rss0
    r["rss_after_kb"] = rss1
    r["processes_before"] = procs0
    r["processes_after"] = procs1
    r["rss_delta_mb"] = (rss1 - rss0) / 1024
    r["kb_per_conn"] = (rss1 - rss0) / stats["ok"] if stats["ok"] else None
    r["idle_cpu_ms_per_s"] = (ns1 - ns0) / 1e6
    r["errors"] = (stats["connect_failed"] + stats["bad_response"] + stats["closed_early"]
                   + stats["unfinished"] + check["closed_by_server"])
    if err:
        r["client_stderr"] = err[-2000:]
    return r


# --------------------------------------------------------------------------------------------
# Driver


def make_docroot(path):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "11.txt"), "wb") as f:
        f.write(b"0123456789\n")
    head = b"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Peregrine bench</title></head>\n<body>\n"
    foot = b"</body></html>\n"
    filler = b"<p>" + b"Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 10
    page = head + filler
    page = page[:663 - len(foot) - len(b"</p>\n")] + b"</p>\n" + foot
    assert len(page) == 663, len(page)
    with open(os.path.join(path, "663.html"), "wb") as f:
        f.write(page)
    with open(os.path.join(path, "135555.bin"), "wb") as f:
        f.write(random.Random(135555).randbytes(135_555))
    for name, size in FILES.items():
        assert os.path.getsize(os.path.join(path, name)) == size, name
    for name, text in PHP_SCRIPTS.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)


def check_paths_for(scenario_names):
    paths = []
    seen = set()
    for n in scenario_names:
        sc = SCENARIOS[n]
        if sc["path"] not in seen:
            seen.add(sc["path"])
            expect = HELLO_BODY if n == "hello" else sc.get("expect")
            paths.append((sc["path"], sc["length"], expect, sc.get("min_length", 0)))
    return paths


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec, none="-"):
    if x is None:
        width = re.match(r"\d*", spec).group(0)
        return none.rjust(int(width)) if width else none
    return format(x, spec)


def ratio(x, width):
    return ("-" if x is None else f"{x:.2f}x").rjust(width)


def summarize_load(entry):
    runs = entry["runs"]
    rss, hwm = entry.get("rss_kb_after", (None, None))
    return {
        "rps": median([r["rps"] for r in runs]),
        "requests": median([r["requests"] for r in runs]),
        "cpu_us_per_req": median([r["cpu_us_per_req"] for r in runs]),
        "cpu_us_per_req_ticks": median([r["cpu_us_per_req_ticks"] for r in runs]),
        "runs_per_req": median([r.get("runs_per_req") for r in runs]),
        "p50_ms": median([r["p50_ms"] for r in runs]),
        "p99_ms": median([r["p99_ms"] for r in runs]),
        "errors": sum(r["errors"] for r in runs),
        "server_cpu_util": median([r["server_cpu_util"] for r in runs]),
        "cpu0_busy": median([r["cpu0_busy"] for r in runs]),
        "rss_mb": rss / 1024 if rss is not None else None,
        "peak_rss_mb": hwm / 1024 if hwm is not None else None,
    }


def ratio_fields(summ, order):
    """Adds cpu ratios vs nginx and vs the best of the reference servers."""
    cpu = {n: summ[n]["cpu_us_per_req"] for n in order if n in summ}
    refs = [cpu[n] for n in REFERENCE_SERVERS if cpu.get(n)]
    best = min(refs) if refs else None
    for n in summ:
        c = cpu.get(n)
        summ[n]["cpu_vs_nginx"] = c / cpu["nginx"] if c and cpu.get("nginx") else None
        summ[n]["cpu_vs_best_ref"] = c / best if c and best else None


def print_load_table(name, sc, result, order, args):
    log("")
    log(f"== {name}: {sc['desc']}")
    log(f"   medians of {args.runs} run(s) x {args.duration}s after a {args.warmup}s warm-up; "
        f"errors summed over the runs; CPU = server CPU time per request (schedstat)")
    hdr = (f"   {'server':<10} {'req/s':>10} {'CPU us/req':>11} {'p99 ms':>8} {'errors':>7} {'RSS MB':>7} "
           f"{'srv CPU%':>8} {'CPU vs nginx':>12} {'vs best ref':>11} {'runs/req':>8}")
    log(hdr)
    for n in order:
        e = result["servers"].get(n)
        if e is None:
            continue
        if "skipped" in e:
            log(f"   {n:<10} skipped: {e['skipped']}")
            continue
        s = e["summary"]
        log(f"   {n:<10} {fmt(s['rps'], '10.0f')} {fmt(s['cpu_us_per_req'], '11.2f')} "
            f"{fmt(s['p99_ms'], '8.2f')} {s['errors']:>7d} {fmt(s['rss_mb'], '7.1f')} "
            f"{fmt(s['server_cpu_util'] and 100 * s['server_cpu_util'], '7.0f')}% "
            f"{ratio(s['cpu_vs_nginx'], 12)} {ratio(s['cpu_vs_best_ref'], 11)} "
            f"{fmt(s.get('runs_per_req'), '8.2f')}")
    low = {n: result["servers"][n]["summary"] for n in order
           if "summary" in result["servers"].get(n, {})
           and (result["servers"][n]["summary"]["server_cpu_util"] or 1) < 0.85}
    if low:
        # CPU 0 time not used by the server = other processes (or idle, if the client was the limit)
        other = max((s["cpu0_busy"] or 0) - (s["server_cpu_util"] or 0) for s in low.values())
        why = (f"other processes used up to {100 * other:.0f}% of CPU {SERVER_CPU} (load {result.get('loadavg', '?')})"
               if other > 0.10 else f"the client on CPU {CLIENT_CPU} was the limit")
        log(f"   note: {', '.join(low)} used less than 85% of CPU {SERVER_CPU}: {why}; req/s and p99 then "
            f"measure that, not the server - compare CPU/request (inflated somewhat when the CPU is shared)")
    if result.get("backend"):
        log(f"   back end: {result['backend']['cmdline']}")
    if sc["length"] is None:
        sizes = {n: result["servers"][n].get("body_bytes") for n in order if "runs" in result["servers"].get(n, {})}
        log("   response body bytes: " + ", ".join(f"{n} {v}" for n, v in sizes.items()))
    log("   wrk commands:")
    for n in order:
        e = result["servers"].get(n)
        if e and "runs" in e and e["runs"]:
            log(f"     {n:<10} {e['runs'][0]['cmd']}")
    with_ab = [n for n in order if "ab" in result["servers"].get(n, {})]
    if with_ab:
        log(f"   ab -k (HTTP/1.0 keep-alive), once per server; target: keep-alive requests = complete = "
            f"{AB_REQUESTS:,}, 0 failed")
        log(f"   {'server':<10} {'complete':>9} {'keep-alive':>10} {'failed':>7} {'non-2xx':>8} {'req/s':>9}  ")
        for n in with_ab:
            a = result["servers"][n]["ab"]
            log(f"   {n:<10} {fmt(a['complete'], '9d')} {fmt(a['keep_alive'], '10d')} {fmt(a['failed'], '7d')} "
                f"{fmt(a['non_2xx'], '8d')} {fmt(a['rps'], '9.0f')}  {a.get('problem', '')}")
        log(f"     {with_ab[0]:<10} {result['servers'][with_ab[0]]['ab']['cmd']}")


def print_idle_table(name, sc, result, order, args):
    log("")
    log(f"== {name}: {sc['desc']}")
    log(f"   median of {args.runs} run(s), each on a freshly started server; client pinned to CPU {CLIENT_CPU}")
    log(f"   {'server':<10} {'RSS before':>10} {'RSS after':>10} {'delta MB':>9} {'KB/conn':>8} "
        f"{'conns ok':>9} {'errors':>7} {'open s':>7} {'idle CPU ms/s':>13}")
    for n in order:
        e = result["servers"].get(n)
        if e is None:
            continue
        if "skipped" in e:
            log(f"   {n:<10} skipped: {e['skipped']}")
            continue
        s = e["summary"]
        log(f"   {n:<10} {fmt(s['rss_before_mb'], '10.1f')} {fmt(s['rss_after_mb'], '10.1f')} "
            f"{fmt(s['rss_delta_mb'], '9.1f')} {fmt(s['kb_per_conn'], '8.2f')} {fmt(s['ok'], '9.0f')} "
            f"{s['errors']:>7d} {fmt(s['open_seconds'], '7.2f')} {fmt(s['idle_cpu_ms_per_s'], '13.2f')}")
    for n in order:
        e = result["servers"].get(n)
        if e and e.get("runs"):
            log(f"   client: {e['runs'][0]['cmd']}  (server {n})")
            break


def start_servers(names, scen_dir, docroot, nofile, args, check_paths, scenario=None, backend=None):
    servers = []
    try:
        for n in names:
            s = SERVER_CLASSES[n](os.path.join(scen_dir, n), docroot, nofile)
            s.scenario = scenario
            s.backend = backend
            servers.append(s)
            s.start(args, check_paths)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers


def stop_all(ctx):
    """Stops the servers, then the back end (so servers do not log back-end errors meanwhile)."""
    for s in ctx["running"]:
        s.stop()
    ctx["running"] = []


def run_load_scenario(name, names, ctx, args):
    sc = SCENARIOS[name]
    result = {"description": sc["desc"], "servers": {}}
    active = []
    result["loadavg"] = " ".join((read_file("/proc/loadavg", "") or "").split()[:3])
    ok, why = backend_available(name)
    for n in names:
        if not ok:
            result["servers"][n] = {"skipped": why}
            continue
        ok, why = SERVER_CLASSES[n].supports(name)
        if ok:
            active.append(n)
        else:
            result["servers"][n] = {"skipped": why}
    if not active:
        return result
    scen_dir = os.path.join(ctx["tmp"], name)
    backend = start_backend(name, os.path.join(scen_dir, "backend"), ctx, active)
    if backend:
        ctx["running"].append(backend)
        result["backend"] = {"name": backend.name, "cmdline": shlex.join(backend.cmd)}
    try:
        servers = start_servers(active, scen_dir, ctx["docroot"], ctx["nofile"], args,
                                check_paths_for([name]), scenario=name, backend=backend)
    except BaseException:
        stop_all(ctx)
        raise
    ctx["running"] = servers + ctx["running"]
    try:
        for s in servers:
            result["servers"][s.name] = {"runs": [], "cmdline": shlex.join(s.cmd), "port": s.port,
                                         "body_bytes": s.body_sizes.get(sc["path"])}
        if args.warmup > 0:
            for s in servers:
                w = wrk_run(s, sc, args.warmup)
                result["servers"][s.name]["warmup"] = w
                log(f"   [{name}] {s.name:<9} warm-up  {w['rps']:10.0f} req/s")
        for i in range(args.runs):
            k = i % len(servers)
            for s in servers[k:] + servers[:k]:  # rotate the order between runs
                r = wrk_run(s, sc, args.duration)
                result["servers"][s.name]["runs"].append(r)
                log(f"   [{name}] {s.name:<9} run {i + 1}/{args.runs} {r['rps']:10.0f} req/s "
                    f"{fmt(r['cpu_us_per_req'], '7.2f')} us/req (ticks: {fmt(r['cpu_us_per_req_ticks'], '.2f')}) "
                    f"p99 {fmt(r['p99_ms'], '.2f')} ms  errors {r['errors']}  "
                    f"srv CPU {100 * r['server_cpu_util']:.0f}%  cpu0 busy {fmt(r['cpu0_busy'] and 100 * r['cpu0_busy'], '.0f')}%")
        for s in servers:
            result["servers"][s.name]["rss_kb_after"] = s.rss_kb()
            result["servers"][s.name]["processes"] = s.rss_breakdown()
        if sc.get("ab"):
            for s in servers:
                a = ab_run(s, sc, args.ab_timeout)
                result["servers"][s.name]["ab"] = a
                log(f"   [{name}] {s.name:<9} ab -k: {fmt(a['complete'], 'd')} complete, "
                    f"{fmt(a['keep_alive'], 'd')} keep-alive, {fmt(a['failed'], 'd')} failed, "
                    f"{fmt(a['non_2xx'], 'd')} non-2xx, {fmt(a['rps'], '.0f')} req/s"
                    + (f"  ({a['problem']})" if a.get("problem") else ""))
    finally:
        stop_all(ctx)
    summ = {}
    for n, e in result["servers"].items():
        if "runs" in e:
            e["summary"] = summ[n] = summarize_load(e)
    ratio_fields(summ, names)
    return result


def run_idle_scenario(name, names, ctx, args):
    sc = SCENARIOS[name]
    result = {"description": sc["desc"], "servers": {}}
    for n in names:
        runs = []
        entry = {"runs": runs}
        result["servers"][n] = entry
        for i in range(args.runs):
            servers = start_servers([n], os.path.join(ctx["tmp"], name, f"{n}-{i + 1}"), ctx["docroot"],
                                    ctx["nofile"], args, check_paths_for([name]))
            ctx["running"] = servers
            try:
                r = idle_run(servers[0], sc)
            finally:
                servers[0].stop()
                ctx["running"] = []
            runs.append(r)
            log(f"   [{name}] {n:<9} run {i + 1}/{args.runs} RSS {r['rss_before_kb'] / 1024:.1f} -> "
                f"{r['rss_after_kb'] / 1024:.1f} MB (+{r['rss_delta_mb']:.1f} MB, "
                f"{fmt(r['kb_per_conn'], '.2f')} KB/conn), {r['ok']} ok, errors {r['errors']}, "
                f"opened in {r['open_seconds']:.2f}s, still open {r['still_open']}")
        entry["summary"] = {
            "rss_before_mb": median([r["rss_before_kb"] / 1024 for r in runs]),
            "rss_after_mb": median([r["rss_after_kb"] / 1024 for r in runs]),
            "rss_delta_mb": median([r["rss_delta_mb"] for r in runs]),
            "kb_per_conn": median([r["kb_per_conn"] for r in runs]),
            "ok": median([r["ok"] for r in runs]),
            "errors": sum(r["errors"] for r in runs),
            "open_seconds": median([r["open_seconds"] for r in runs]),
            "idle_cpu_ms_per_s": median([r["idle_cpu_ms_per_s"] for r in runs]),
        }
    return result


def machine_info():
    cpu = "?"
    for line in (read_file("/proc/cpuinfo", "") or "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "kernel": platform.release(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "loadavg_start": (read_file("/proc/loadavg", "") or "").strip(),
        "python": platform.python_version(),
        "clk_tck": CLK_TCK,
    }


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Benchmark Peregrine against nginx, H2O and lighttpd "
                                             "(prints figures; not a pass/fail test).")
    ap.add_argument("--runs", type=int, default=3, help="measured runs per scenario and server (default 3)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per measured run (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per scenario and server (default 2)")
    ap.add_argument("--servers", default=",".join(ALL_SERVERS),
                    help=f"comma-separated subset of {','.join(ALL_SERVERS)}")
    ap.add_argument("--scenarios", default=",".join(SCENARIO_ORDER),
                    help=f"comma-separated subset of {','.join(SCENARIO_ORDER)}; "
                         f"proxy_slow = {','.join(SCENARIO_ALIASES['proxy_slow'])}")
    ap.add_argument("--peregrine", default=DEFAULT_PEREGRINE, help=f"peregrine binary (default {DEFAULT_PEREGRINE})")
    ap.add_argument("--json", metavar="FILE", help="write all results (every run) as JSON to FILE")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (configs, logs) for inspection")
    ap.add_argument("--ab-timeout", type=int, default=30,
                    help="ab -s: seconds ab waits on a socket in the php_hello keep-alive check (default 30)")
    # internal: the idle10k client
    ap.add_argument("--_idle-client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_reaper", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_count", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_path", help=argparse.SUPPRESS)
    ap.add_argument("--_length", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._idle_client or args._reaper:
        return args
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    args.scenarios = [x for s in args.scenarios.split(",") if s.strip()
                      for x in SCENARIO_ALIASES.get(s.strip(), [s.strip()])]
    for s in args.servers:
        if s not in SERVER_CLASSES:
            ap.error(f"unknown server {s!r} (known: {', '.join(ALL_SERVERS)})")
    for s in args.scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s!r} (known: {', '.join(SCENARIO_ORDER + list(SCENARIO_ALIASES))})")
    if args.runs < 1 or args.duration < 1 or args.warmup < 0 or args.ab_timeout < 1:
        ap.error("--runs, --duration and --ab-timeout must be >= 1, --warmup >= 0")
    args.peregrine = os.path.abspath(args.peregrine)
    # keep the canonical orders
    args.servers = [s for s in ALL_SERVERS if s in args.servers]
    args.scenarios = [s for s in SCENARIO_ORDER if s in args.scenarios]
    return args


def _on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv):
    args = parse_args(argv)
    if args._idle_client:
        idle_client(args._port, args._count, args._path, args._length)
        return 0
    if args._reaper:
        reaper_main()
        return 0

    for tool in ("wrk", "taskset"):
        if not shutil.which(tool):
            log(f"error: {tool} not found in PATH")
            return 2
    if (os.cpu_count() or 1) < 2:
        warn("fewer than 2 CPUs: server and client will share a CPU")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    nofile = raise_nofile()

    names = []
    skipped = {}
    versions = {}
    for n in args.servers:
        ok, why = SERVER_CLASSES[n].available(args)
        if ok:
            names.append(n)
            try:
                versions[n] = SERVER_CLASSES[n].version(args)
            except (BenchError, OSError) as e:
                versions[n] = f"? ({e})"
        else:
            skipped[n] = why
            log(f"*** {n}: SKIPPED - {why}")
    if not names:
        log("error: no server to benchmark")
        return 2
    if any(SCENARIOS[n].get("backend") == "php" for n in args.scenarios) and PhpFpm.available()[0]:
        try:
            versions["php-fpm (back end)"] = PhpFpm.version()
        except (BenchError, OSError) as e:
            versions["php-fpm (back end)"] = f"? ({e})"

    global REAPER
    REAPER = Reaper()
    tmp = tempfile.mkdtemp(prefix="peregrine-bench-")
    os.chmod(tmp, 0o755)  # servers that drop privileges must still read the docroot
    docroot = os.path.join(tmp, "www")
    make_docroot(docroot)
    ctx = {"tmp": tmp, "docroot": docroot, "nofile": nofile, "running": []}
    results = {
        "tool": "bench/run.py",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
        "machine": machine_info(),
        "versions": versions,
        "skipped_servers": skipped,
        "method": {
            "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU,
            "cpu_per_request": "sum over all threads of all server processes of /proc/PID/task/TID/schedstat "
                               "field 1 (ns on CPU), delta across the wrk run, / requests completed; "
                               "cpu_us_per_req_ticks is the same from /proc/PID/stat utime+stime (CLK_TCK)",
            "runs_per_req": "schedstat field 3 (times a thread was put on a CPU: wake-ups and "
                            "preemptions) summed the same way, / requests completed",
            "rss": "sum of VmRSS over the server's processes",
            "nofile_limit": nofile,
        },
        "scenarios": {},
    }
    log(f"peregrine bench: servers {', '.join(names)}; scenarios {', '.join(args.scenarios)}; "
        f"{args.runs} run(s) x {args.duration}s, warm-up {args.warmup}s")
    log("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if "peregrine" in names:
        fp = Peregrine.fingerprint(args.peregrine)
        git = ""
        try:
            rc_, out, _ = run_cmd(["git", "-C", os.path.dirname(HERE), "rev-parse", "--short", "HEAD"], 10)
            rc2, dirty, _ = run_cmd(["git", "-C", os.path.dirname(HERE), "status", "--porcelain",
                                     "--untracked-files=no"], 10)
            if rc_ == 0:
                git = out.strip() + ("+dirty" if dirty.strip() else "")
        except (BenchError, OSError):
            pass
        results["peregrine_binary"] = dict(fp, git=git)
        log(f"peregrine binary: {fp['path']} sha256 {fp['sha256']} built {fp['mtime']}"
            + (f" (tree {git})" if git else ""))
    log(f"machine: {results['machine']['cpu_model']}, {results['machine']['cpus']} CPUs, "
        f"kernel {results['machine']['kernel']}, load {results['machine']['loadavg_start']}")
    log(f"servers pinned to CPU {SERVER_CPU}, wrk/client to CPU {CLIENT_CPU}; RLIMIT_NOFILE {nofile}; temp dir {tmp}")
    rc = 0
    try:
        for name in args.scenarios:
            log("")
            log(f"--- scenario {name}: {SCENARIOS[name]['desc']}")
            try:
                if name == "idle10k":
                    res = run_idle_scenario(name, names, ctx, args)
                else:
                    res = run_load_scenario(name, names, ctx, args)
            except (ServerError, BackendError) as e:
                # Recorded, and the exit status will be 1, but the other scenarios still run.
                what = "BACK-END" if isinstance(e, BackendError) else "SERVER"
                log(f"\n*** {what} FAILURE in scenario {name}:\n{e}")
                results["scenarios"][name] = {"error": str(e)}
                rc = 1
                continue
            results["scenarios"][name] = res
            (print_idle_table if name == "idle10k" else print_load_table)(name, SCENARIOS[name], res, names, args)
        results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if Peregrine.fingerprints:
            results["peregrine_binaries"] = Peregrine.fingerprints
        results["machine"]["loadavg_end"] = (read_file("/proc/loadavg", "") or "").strip()
    except (ServerError, BenchError) as e:
        log(f"\n*** ERROR: {e}")
        rc = 1
    except KeyboardInterrupt:
        log("\ninterrupted")
        rc = 130
    except SystemExit as e:
        log(f"\nterminated by a signal")
        rc = e.code if isinstance(e.code, int) else 1
    finally:
        for s in ctx["running"]:
            s.stop()
        REAPER.close()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2, sort_keys=False)
                f.write("\n")
            log(f"\nJSON written to {args.json}")
        if args.keep_tmp or rc == 1:
            log(f"temp dir kept (configs and server logs): {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if skipped:
        log("")
        for n, why in skipped.items():
            log(f"*** {n} was SKIPPED: {why}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
