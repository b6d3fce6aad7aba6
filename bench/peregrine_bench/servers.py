"""One class per web server under test: its generated config, its command line, start and stop."""

import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time

from . import measure, procs
from .common import REPO_DIR, SERVER_CPU, BenchError, ServerError, log, warn
from .procs import free_port, http_get, kill_group, read_file, run_cmd, tail
from .scenarios import PHP_FPM_CHILDREN, SCENARIOS
from .tls import https_get

DEFAULT_PEREGRINE = "/work/main/build/release/peregrine"
REFERENCE_SERVERS = ("nginx", "h2o", "lighttpd")
ALL_SERVERS = ("peregrine",) + REFERENCE_SERVERS
# Everything --servers accepts, in the order tables list it; the others only when asked for.
KNOWN_SERVERS = ("peregrine", "peregrine-uring", "peregrine-quick", "canned-epoll") + REFERENCE_SERVERS


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
        self.tls = None  # (certificate, key) when the scenario is over TLS
        self.tls_info = None  # what the start-up check negotiated: ALPN, version, cipher
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

    def is_tls(self):
        return bool(self.scenario and SCENARIOS[self.scenario].get("tls"))

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
                                             preexec_fn=procs.die_with_parent)
            finally:
                out.close()
                err.close()
            procs.watch(self.proc.pid)
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
        if self.is_tls():
            # ALPN first: a TLS listener must offer h2 (every server here does by default, and
            # Peregrine's TLS listeners do too), then each path over HTTP/1.1.
            try:
                _, _, _, self.tls_info = https_get(self.port, "/")
            except (OSError, BenchError) as e:
                raise ServerError(f"{self.name}: TLS handshake failed: {e}\n" + self.diagnostics())
            if SCENARIOS[self.scenario].get("h2") and self.tls_info["alpn"] != "h2":
                raise ServerError(f"{self.name}: ALPN selected {self.tls_info['alpn']!r}, not h2\n"
                                  + self.diagnostics())
        for path, length, expect, min_length in check_paths:
            try:
                status, body = self.fetch(path)
            except (OSError, BenchError) as e:
                raise ServerError(f"{self.name}: GET {path} failed: {e}\n" + self.diagnostics())
            self.body_sizes[path] = len(body)
            size_ok = len(body) == length if length is not None else len(body) >= min_length
            if status != 200 or not size_ok or (expect is not None and body != expect):
                want = f"{length} bytes" if length is not None else f">= {min_length} bytes"
                raise ServerError(f"{self.name}: GET {path} -> status {status}, {len(body)} bytes "
                                  f"(want 200, {want}): {body[:80]!r}\n" + self.diagnostics())

    def fetch(self, path):
        """(status, body) of one GET of `path`: the start-up check."""
        if self.is_tls():
            status, _, body, _ = https_get(self.port, path, alpn=("http/1.1",))
        else:
            status, _, body = http_get(self.port, path)
        return status, body

    def pids(self):
        """All processes of the server: its process group plus any descendants that left it."""
        return measure.process_tree(self.proc.pid) if self.proc is not None else []

    def cpu_sample(self):
        return measure.cpu_sample(self.pids())

    def rss_kb(self):
        return measure.rss_kb(self.pids())

    def rss_breakdown(self):
        return measure.rss_breakdown(self.pids())

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
        procs.reap(self.proc)
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


def nginx_conf(workdir, nofile, head, types, http_body):
    """An nginx.conf for one worker (master and worker both measured) that keeps every file it
    writes in `workdir`; `http_body` (upstreams, the server block) goes inside http {}. The server
    under test and the proxy scenarios' back end differ only in `head`, `types` and `http_body`."""
    w = workdir
    user = "user root root;\n" if os.geteuid() == 0 else ""
    type_lines = "".join(f"        {t};\n" for t in types)
    return f"""{head}{user}worker_processes 1;
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
{type_lines}    }}
    default_type application/octet-stream;
    client_body_temp_path {w}/client_body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
{http_body}}}
"""


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
        if kind == "php" and SCENARIOS[self.scenario].get("quick"):
            # The posts' rows: nginx as its guides set up PHP, a new php-fpm connection per
            # request. With fastcgi_keep_conn, a php-fpm child stays with an idle kept-alive
            # connection while requests on nginx's other connections wait in php-fpm's backlog:
            # ab -c 50 then times out on some of them.
            params = "".join(f"            fastcgi_param {k} {v};\n" for k, v in NGINX_FASTCGI_PARAMS)
            location = f"""        location ~ \\.php$ {{
            fastcgi_pass unix:{self.backend.socket_for(self.name)};
{params}        }}
"""
            return "", location
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
        upstreams, locations = self.backend_blocks()
        listen = f"listen 127.0.0.1:{self.port};"
        if self.is_tls():
            # nginx 1.22's default ssl_protocols leave TLS 1.3 out: every server here gets 1.2 and
            # 1.3, as the issue asks of Peregrine. Tickets on (nginx's default); no session cache.
            cert, key = self.tls
            listen = f"""listen 127.0.0.1:{self.port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;"""
            if SCENARIOS[self.scenario].get("h2"):
                # keepalive_requests (1000) ends each HTTP/2 connection with GOAWAY; h2load does
                # not reconnect, so after 100 x 1000 requests nginx would sit idle for the rest of
                # the run and the refused streams would count as errors. H2O and lighttpd have no
                # such limit.
                listen += "\n        keepalive_requests 1000000000;"
        conf = nginx_conf(w, self.nofile, "# generated by bench/run.py\n",
                          ("text/plain txt", "text/html html", "application/octet-stream bin"),
                          f"""{upstreams}    server {{
        {listen}
        root {self.docroot};
        location = /hello {{
            return 200 "hello world";
        }}
{locations}    }}
""")
        path = self.write("nginx.conf", conf)
        return [self.binary_path(args), "-p", w + "/", "-e", f"{w}/error.log", "-c", path]


class H2O(Server):
    name = "h2o"
    binary = "h2o"
    _mruby = None

    def h2o_ssl(self):
        # h2o offers h2 by ALPN on a TLS listener; session tickets and its cache are on by default.
        if not self.is_tls():
            return ""
        cert, key = self.tls
        return (f"  ssl:\n    certificate-file: {cert}\n    key-file: {key}\n"
                f"    minimum-version: TLSv1.2\n")

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
{self.h2o_ssl()}file.mime.settypes:
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
    def openssl_available(cls):
        return os.path.exists("/usr/lib/lighttpd/mod_openssl.so")

    @classmethod
    def supports(cls, scenario):
        if SCENARIOS[scenario].get("tls") and not cls.openssl_available():
            return False, "lighttpd's mod_openssl is not installed (Debian package lighttpd-mod-openssl)"
        if scenario == "hello" and not cls.magnet_available():
            return False, ("mod_magnet (Lua) is not installed (Debian package lighttpd-modules-lua); "
                           "lighttpd has no other way to return a fixed body")
        if scenario.startswith("proxy_slow"):
            return False, "not part of the proxy_slow comparison (Peregrine, nginx, H2O)"
        return True, ""

    def error_logs(self):
        return [os.path.join(self.workdir, "error.log")] + super().error_logs()

    def tls_config(self):
        # HTTP/2 is on by default in lighttpd 1.4.69 (server.h2proto), offered by ALPN.
        if not self.is_tls():
            return ""
        cert, key = self.tls
        return ('server.modules += ("mod_openssl")\n'
                'ssl.engine = "enable"\n'
                f'ssl.pemfile = "{cert}"\n'
                f'ssl.privkey = "{key}"\n'
                'ssl.openssl.ssl-conf-cmd = ("MinProtocol" => "TLSv1.2")\n')

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
{magnet}{self.backend_config()}{self.tls_config()}"""
        path = self.write("lighttpd.conf", conf)
        return [self.binary_path(args), "-D", "-f", path]


def peregrine_tls_toml(port, cert, key):
    """(listen line, site table) of a Peregrine config serving TLS on 127.0.0.1:port. A TLS
    listener has `http2` on by default and offers h2 by ALPN, so the h2_* scenarios need
    nothing more."""
    listen = f'listen = [{{ address = "127.0.0.1:{port}", tls = true }}]'
    site = f'[site.tls]\ncertificate = "{cert}"\nkey = "{key}"\n'
    return listen, site


class Peregrine(Server):
    name = "peregrine"
    path = None  # a labelled build's binary (peregrine_variant); None: --peregrine
    event_backend = None  # None: the binary's default (epoll); PeregrineUring: "io_uring"
    fingerprints = []  # one entry per distinct binary seen while running (it may be rebuilt meanwhile)

    @classmethod
    def fingerprint(cls, path):
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
                warn(f"{self.name} binary changed during the run (now sha256 {fp['sha256']}, "
                     f"built {fp['mtime']}): later scenarios measure a different build")
            self.fingerprints.append(fp)
        super().start(args, check_paths, attempts)

    @classmethod
    def binary_path(cls, args):
        return cls.path or args.peregrine

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

    def quick_command(self, args):
        """Quick mode, as the posts' rows run it: flags a new user types, no config file."""
        cmd = [self.binary_path(args), "--listen", f"127.0.0.1:{self.port}", "--workers", "1",
               "--root", self.docroot, "--access-log", "off", "--error-log", f"{self.workdir}/error.log"]
        kind = self.backend_kind()
        if kind == "php":
            cmd += ["--fastcgi", f"unix:{self.backend.socket_for(self.name)}"]
        elif kind == "http":
            cmd += ["--proxy", f"/app/=http://127.0.0.1:{self.backend.port}"]
        if self.event_backend:
            cmd += ["--event-backend", self.event_backend]
        return cmd

    def make_command(self, args):
        if self.scenario and SCENARIOS[self.scenario].get("quick"):
            return self.quick_command(args)
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
        listen, site_tls, limits = f'listen = ["127.0.0.1:{self.port}"]', "", ""
        h2 = bool(SCENARIOS[self.scenario].get("h2"))
        if self.is_tls():
            listen, site_tls = peregrine_tls_toml(self.port, *self.tls)
        if h2:
            # As for nginx: max_requests_per_connection (1000) ends an HTTP/2 connection with
            # GOAWAY, and h2load does not reconnect.
            limits = "\n[limits]\nmax_requests_per_connection = 1000000000\n"
        backend = f'event_backend = "{self.event_backend}"\n' if self.event_backend else ""
        conf = f"""# generated by bench/run.py
{listen}
workers = 1
{backend}error_log = "{w}/error.log"
{limits}{upstreams}
[[site]]
root = "{self.docroot}"
access_log = "off"

{site_tls}
[[site.route]]
exact = "/hello"
return = 200
body = "hello world"

{routes}"""
        path = self.write("peregrine.toml", conf)
        return [self.binary_path(args), "-c", path]


class PeregrineQuick(Peregrine):
    """The same binary started as the README's one-liners start it (quick mode: --root, --fastcgi
    or --proxy, no config file), in any scenario, beside `peregrine` from a config file. Issue 15
    asks the one-liner for at most 1.1x the tuned config's CPU per request: a ratio of two rows
    measured in turns within one scenario, not of two scenarios minutes apart on a machine whose
    speed drifts."""
    name = "peregrine-quick"

    @classmethod
    def supports(cls, scenario):
        # `--proxy /app/=URL` proxies /app/ only: elsewhere it would serve the docroot's copy of
        # the page and pass for a proxy at a fraction of the cost.
        sc = SCENARIOS[scenario]
        if sc.get("backend") == "http" and not sc["path"].startswith("/app/"):
            return False, "quick mode proxies only /app/ (--proxy /app/=URL); this path would be served as a file"
        return True, ""

    def make_command(self, args):
        return self.quick_command(args)


class PeregrineUring(Peregrine):
    """The same binary on the io_uring event backend (issue 19: `event_backend = "io_uring"` in the
    config file, `--event-backend io_uring` in quick mode), measured in turns with `peregrine` on
    epoll. io_uring asked for explicitly either runs or stops the server, and the start-up check
    also wants the log line that says it is in use, so a row is never epoll under this name."""
    name = "peregrine-uring"
    event_backend = "io_uring"
    fingerprints = []

    def wait_ready(self, check_paths, timeout=15.0):
        super().wait_ready(check_paths, timeout)
        log_text = "".join(read_file(p, "") or "" for p in self.error_logs())
        if "event backend: io_uring" not in log_text:
            raise ServerError(f"{self.name}: started, but its log does not say `event backend: io_uring`\n"
                              + self.diagnostics())


# Where canned-epoll's one fixed reply is a fair floor: a file served as is, on keep-alive
# connections (it never closes a connection itself, and does not look at the request).
CANNED_SCENARIOS = ("small", "page", "small_c1000", "c1000")
CANNED_EPOLL_TARGET = "canned-epoll"


def canned_epoll_build_command():
    return ["cmake", "--build", os.path.join(REPO_DIR, "build", "release"), "--target", CANNED_EPOLL_TARGET]


class CannedEpoll(Server):
    """bench/canned_epoll.cc: one epoll loop that answers every read with the scenario's file as a
    canned response, without parsing. Issue 19's floor: no epoll server can spend much less."""
    name = "canned-epoll"

    @classmethod
    def binary_path(cls, args):
        return args.canned_epoll

    @classmethod
    def available(cls, args):
        path = cls.binary_path(args)
        if os.access(path, os.X_OK):
            return True, ""
        build_dir = os.path.join(REPO_DIR, "build", "release")
        how = (f"build it with `cmake --preset release && {shlex.join(canned_epoll_build_command())}`, "
               "or give --canned-epoll PATH")
        if path != os.path.join(build_dir, CANNED_EPOLL_TARGET) or not os.path.exists(
                os.path.join(build_dir, "CMakeCache.txt")):
            return False, f"binary not found: {path} ({how})"
        # This tree's build directory is configured: build the one small target now.
        log(f"building {CANNED_EPOLL_TARGET}: {shlex.join(canned_epoll_build_command())}")
        try:
            rc, out, err = run_cmd(canned_epoll_build_command(), 300)
        except (BenchError, OSError) as e:
            return False, f"building it failed: {e} ({how})"
        if rc != 0 or not os.access(path, os.X_OK):
            return False, f"building it failed (exit {rc}): {(err or out).strip()[-500:]} ({how})"
        return True, ""

    @classmethod
    def version(cls, args):
        return "bench/canned_epoll.cc"

    @classmethod
    def supports(cls, scenario):
        if scenario not in CANNED_SCENARIOS:
            return False, (f"a canned reply is a floor only for a file on keep-alive connections "
                           f"({', '.join(CANNED_SCENARIOS)}); it does not parse, proxy or close")
        return True, ""

    def make_command(self, args):
        body = os.path.join(self.docroot, SCENARIOS[self.scenario]["path"].lstrip("/"))
        return [self.binary_path(args), str(self.port), body]

    def fetch(self, path):
        # It never closes a connection: read one response by its Content-Length.
        status, _, body = http_get(self.port, path, headers={"Connection": "keep-alive"}, one_response=True)
        return status, body


SERVER_CLASSES = {"peregrine": Peregrine, "peregrine-uring": PeregrineUring, "peregrine-quick": PeregrineQuick,
                  "canned-epoll": CannedEpoll, "nginx": Nginx, "h2o": H2O, "lighttpd": Lighttpd}


def peregrine_variant(label, path, base=Peregrine):
    """A server class "peregrine-LABEL" running the binary at `path` as `base` runs it (epoll, or
    PeregrineUring): two builds in one run share the warm-up, the interleaved runs and the
    machine's background noise, which is what makes a difference of a few percent between them
    measurable at all."""
    return type(f"{base.__name__}_{label}", (base,),
                {"name": f"peregrine-{label}", "path": path, "fingerprints": []})
