"""A real Tomcat 10 (Debian's tomcat10) for the AJP integration tests and the benchmark.

Tomcat writes a CATALINA_BASE into a directory: conf/ copied from the package's defaults with a
server.xml of our own (an AJP connector on 127.0.0.1 with a secret, an HTTP connector for the
proxy comparison, the Engine's jvmRoute), and the test webapp (tests/integration/ajp_webapp, JSPs
that Tomcat compiles with its bundled JDT compiler) as the ROOT context. It starts
`catalina.sh run` (which execs the JVM: the process we started is Tomcat itself), waits until
both connectors accept connections, and stops it with SIGTERM (SIGKILL after a while). kill()
SIGKILLs it at once (a back end that dies mid-response).

The JVM takes seconds to start: start one per test class, not per test.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

CATALINA_HOME = os.environ.get("CATALINA_HOME") or "/usr/share/tomcat10"
WEBAPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ajp_webapp")
START_TIMEOUT = 90.0

SERVER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector protocol="AJP/1.3" address="127.0.0.1" port="{ajp_port}" {secret_attr}
               packetSize="{packet_size}" maxThreads="{threads}" acceptCount="1000"
               connectionTimeout="60000" tomcatAuthentication="false" />
    <Connector protocol="HTTP/1.1" address="127.0.0.1" port="{http_port}"
               maxThreads="{threads}" acceptCount="1000" maxKeepAliveRequests="-1" />
    <Engine name="Catalina" defaultHost="localhost" jvmRoute="{route}">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        <Context path="" docBase="{webapp}" reloadable="false" />
      </Host>
    </Engine>
  </Service>
</Server>
"""


def available():
    return os.access(os.path.join(CATALINA_HOME, "bin", "catalina.sh"), os.X_OK) and \
        shutil.which("java") is not None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Tomcat:
    def __init__(self, base, secret="s3cret", route="node1", packet_size=8192, threads=200,
                 heap="192m", webapp=WEBAPP):
        self.base = base
        self.secret = secret
        self.route = route
        self.packet_size = packet_size
        self.threads = threads
        self.heap = heap
        self.webapp = webapp
        self.ajp_port = None
        self.http_port = None
        self.proc = None

    def _write_base(self):
        conf = os.path.join(self.base, "conf")
        if not os.path.isdir(conf):
            shutil.copytree(os.path.join(CATALINA_HOME, "etc"), conf,
                            ignore=shutil.ignore_patterns("Catalina", "policy.d"))
        for d in ("logs", "temp", "work", "webapps", "lib"):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        secret_attr = (f'secret="{self.secret}"' if self.secret
                       else 'secretRequired="false"')
        with open(os.path.join(conf, "server.xml"), "w") as f:
            f.write(SERVER_XML.format(ajp_port=self.ajp_port, http_port=self.http_port,
                                      secret_attr=secret_attr, packet_size=self.packet_size,
                                      threads=self.threads, route=self.route,
                                      webapp=self.webapp))

    def start(self):
        if self.ajp_port is None:
            self.ajp_port = free_port()
            self.http_port = free_port()
        self._write_base()
        env = dict(os.environ)
        env.update({
            "CATALINA_HOME": CATALINA_HOME,
            "CATALINA_BASE": self.base,
            "CATALINA_PID": "",
            "CATALINA_OUT": os.path.join(self.base, "logs", "catalina.out"),
            "JAVA_OPTS": f"-Xms64m -Xmx{self.heap} -Xss512k -XX:+UseSerialGC "
                         f"-XX:TieredStopAtLevel=1 -Djava.security.egd=file:/dev/urandom "
                         f"-Dtest.node={self.route}",
        })
        self._log = open(os.path.join(self.base, "logs", "console.log"), "ab")
        self.proc = subprocess.Popen([os.path.join(CATALINA_HOME, "bin", "catalina.sh"), "run"],
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env, cwd=self.base)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tomcat exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            if _accepts(self.ajp_port) and _accepts(self.http_port):
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"tomcat did not listen within {START_TIMEOUT}s:\n{self.log()[-4000:]}")

    def log(self):
        try:
            with open(os.path.join(self.base, "logs", "console.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def kill(self):
        """SIGKILL: the back end dies at once, mid-response if it was answering."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()

    def warm_up(self, paths):
        """Compiles the JSPs once (the first request of each takes the compiler's time)."""
        import http.client
        for path in paths:
            for _ in range(2):
                try:
                    c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=60)
                    c.request("GET", path)
                    c.getresponse().read()
                    c.close()
                    break
                except OSError:
                    time.sleep(0.5)
