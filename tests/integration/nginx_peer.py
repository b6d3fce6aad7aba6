"""nginx as a peer of the integration tests (a back end to proxy to, or a server to compare
against): one process in its own prefix directory, started from a test's `server` blocks, waited
for, and stopped. The rest of the config is what every such test needs and nothing more."""

import os
import shutil
import signal
import socket
import subprocess
import time

import harness

# What the tests read back from nginx's access log: which connection served a request, its
# number on that connection and whether TLS resumed a session ("-" on plain connections).
CONNECTION_LOG = "$connection $connection_requests $ssl_session_reused $request_uri"


class NginxPeer:
    def __init__(self, prefix, servers, ports, log_format=CONNECTION_LOG, http_extra="",
                 master=False):
        """`servers`: the server blocks; `ports`: the loopback ports they listen on, waited for.
        `master`: a master process and one worker, as nginx runs in production, so that reload()
        replaces the worker as a deploy does."""
        self.binary = harness.require_tool("nginx", "nginx-light", shutil.which("nginx") or "/usr/sbin/nginx")
        self.prefix = prefix
        self.access_log = os.path.join(prefix, "access.log")
        self.error_log = os.path.join(prefix, "error.log")
        os.makedirs(prefix, exist_ok=True)
        conf = os.path.join(prefix, "nginx.conf")
        # As root, the worker would otherwise run as nobody, who cannot read the tests' files.
        process = ("master_process on;\nworker_processes 1;\n"
                   + ("user root;\n" if os.geteuid() == 0 else "")) if master else "master_process off;"
        with open(conf, "w") as f:
            f.write(f"""
daemon off;
{process}
pid {prefix}/nginx.pid;
error_log {self.error_log};
events {{ worker_connections 1024; }}
http {{
  log_format peer '{log_format}';
  access_log {self.access_log} peer;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  keepalive_requests 10000;
  {http_extra}
{servers}
}}
""")
        self.proc = subprocess.Popen([self.binary, "-p", prefix, "-c", conf, "-e", self.error_log],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        for port in ports:
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    with open(self.error_log, errors="replace") as log:
                        raise RuntimeError(f"nginx did not start: {self.proc.stderr.read().decode()}\n"
                                           + log.read())
                time.sleep(0.05)

    def lines(self, marker=""):
        """Access-log lines containing `marker`, split into their fields."""
        try:
            with open(self.access_log) as f:
                return [line.split() for line in f if marker in line]
        except FileNotFoundError:
            return []

    def reload(self):
        """SIGHUP: the master starts a worker on the config and lets the old one finish
        gracefully, closing its idle keep-alive connections (`master=True` only)."""
        self.proc.send_signal(signal.SIGHUP)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()
