"""The smuggling table (issue 49): requests built to make a back end run something other than what
Peregrine routed and checked, sent through the proxy, FastCGI and AJP routes over HTTP/1.1 (raw
sockets) and HTTP/2 (python3-h2 with its outbound header checks off, over h2c and TLS).

The back ends are recorders (backends/recording_backend.py) that keep every byte they receive and
decode it strictly: HTTP/1.1 requests for the proxy, FastCGI records, AJP13 packets. For every
case the back ends together must have seen exactly one request, with the routed method, target
and authority, at the back end of the route that should take it, or none at all; nothing that
does not decode, and no bytes left over. Whatever the case, no back end may see a path that a
route rule guards: `/admin/` (`return = 403`), `/private/` (`access` deny) and `/secret/` (basic
auth).

Two sites with back ends of their own (a.test, b.test) show misrouting: a request routed by one
site and forwarded with the other's Host, or taken by the other's back end, fails its case.
"""

import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "backends"))
from harness import ConnectionClosed, RawClient, ServerTestCase, main, missing, q, require_tool  # noqa: E402
from recording_backend import AjpRecorder, FastcgiRecorder, HttpRecorder  # noqa: E402

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
except ImportError:  # python3-h2; reported by the HTTP/2 cases
    h2 = None

PROTOCOL_ERROR = 1
PROTECTED = ("/admin/", "/private/", "/secret/")
AJP_SECRET = "smuggling-secret"
# Nobody can log in with it (the password is not in this file): only the 401 matters.
HTPASSWD = ("someone:$6$smuggle$vvOYh/mei5AxfOvlfjz23TJrTzYljdbBHhvdMHeR9Ev2TaK/S59v.n1QUI7s3iDin5N"
            "uQ5W2MvFaBTtk3xTFA1\n")
# A settings payload as curl sends it: base64url of a SETTINGS frame's payload.
HTTP2_SETTINGS = "AAMAAABkAAQCAAAAAAIAAAAA"
# Time for bytes a back end received behind an answered request (a smuggled second request) to be
# decoded before the recorders are read.
SETTLE = 0.15
SETTLE_REFUSED = 0.03


def inner_request(path):
    """The request an attacker hides in a body: a complete one, with a forged X-Forwarded-For."""
    return (f"POST {path} HTTP/1.1\r\nHost: a.test\r\nX-Forwarded-For: 127.0.0.1\r\n"
            f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\n"
            f"confirm").encode()


def chunked(body):
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def head(request_line, fields):
    return (request_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n").encode(
        "latin-1")


class Req:
    """The one request a case must bring to back end `backend`."""

    def __init__(self, backend, method, target, authority, body=b"", absent=()):
        self.backend, self.method, self.target, self.authority = backend, method, target, authority
        self.body, self.absent = body, absent

    def __repr__(self):
        return f"one {self.method} {self.target} Host {self.authority} at {self.backend}"


class Refused:
    """No request at any back end, and the client told so: one of `statuses` (HTTP/1.1 and
    HTTP/2), or over HTTP/2 a stream reset (with `reset_code`, or any code when None)."""

    def __init__(self, *statuses, reset=False, reset_code=PROTOCOL_ERROR):
        self.statuses, self.reset, self.reset_code = statuses, reset, reset_code

    def __repr__(self):
        resets = (f" or RST_STREAM({self.reset_code if self.reset_code is not None else 'any'})"
                  if self.reset else "")
        return f"nothing at any back end; status {self.statuses}{resets}"


def bad_h2(*statuses):
    """Refused over HTTP/2: 400, or the stream reset with PROTOCOL_ERROR (RFC 9113 8.1.1)."""
    return Refused(*(statuses or (400,)), reset=True)


class SmugglingTestCase(ServerTestCase):
    """Six recorders (an HTTP, a FastCGI and an AJP back end for each of a.test and b.test) and a
    Peregrine with three listeners: HTTP/1.1 on 127.0.0.1, h2c on 127.0.0.2, TLS on 127.0.0.3."""

    @classmethod
    def setUpClass(cls):
        cls.certdir = tempfile.mkdtemp(prefix="peregrine-smuggling-")
        openssl = require_tool("openssl", "openssl")
        cls.cert, cls.key = os.path.join(cls.certdir, "cert.pem"), os.path.join(cls.certdir, "key.pem")
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", cls.key, "-out", cls.cert, "-days", "2", "-subj", "/CN=a.test",
                        "-addext", "subjectAltName=DNS:a.test,DNS:b.test,DNS:localhost"],
                       check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certdir, True)

    def setUp(self):
        super().setUp()
        self.backends = {}
        for name, cls in (("http-a", HttpRecorder), ("http-b", HttpRecorder),
                          ("fcgi-a", FastcgiRecorder), ("fcgi-b", FastcgiRecorder),
                          ("ajp-a", AjpRecorder), ("ajp-b", AjpRecorder)):
            rec = cls(name)
            self.addCleanup(rec.close)
            self.backends[name] = rec
        self.root = self.make_root({"index.html": "static\n", "php/ok.php": "<?php\n",
                                    "php/chat.php": "<?php\n"})
        users = os.path.join(self.tmp, "users.htpasswd")
        with open(users, "w") as f:
            f.write(HTPASSWD)
        b = {name: rec.address for name, rec in self.backends.items()}
        tls = f"tls = {{ certificate = {q(self.cert)}, key = {q(self.key)} }}\n"
        site = f"root = {q(self.root)}\naccess_log = \"off\"\n{tls}"

        def ajp(address):
            return f'ajp = "ajp://{address}"\najp_secret = {q(AJP_SECRET)}\n'

        config = (
            'listen = ["127.0.0.1:0", { address = "127.0.0.2:0", http2 = true },\n'
            '          { address = "127.0.0.3:0", tls = true }]\nworkers = 1\n\n'
            # Anything not for a.test or b.test: static files, no back end.
            f'[[site]]\nhosts = ["localhost"]\ndefault = true\n{site}\n'
            f'[[site]]\nhosts = ["a.test"]\n{site}\n'
            '[[site.route]]\nprefix = "/admin/"\nreturn = 403\n\n'
            f'[[site.route]]\nprefix = "/private/"\nproxy = "http://{b["http-a"]}"\n'
            'access = [ { deny = "all" } ]\n\n'
            f'[[site.route]]\nprefix = "/secret/"\nproxy = "http://{b["http-a"]}"\n'
            f'auth = {{ htpasswd = {q(users)}, realm = "smuggling" }}\n\n'
            f'[[site.route]]\nprefix = "/plain/"\nproxy = "http://{b["http-a"]}"\nwebsocket = false\n\n'
            f'[[site.route]]\nprefix = "/php/"\nfastcgi = "{b["fcgi-a"]}"\n\n'
            f'[[site.route]]\nprefix = "/ajp/"\n{ajp(b["ajp-a"])}\n'
            f'[[site.route]]\nprefix = "/"\nproxy = "http://{b["http-a"]}"\n\n'
            f'[[site]]\nhosts = ["b.test"]\n{site}\n'
            f'[[site.route]]\nprefix = "/php/"\nfastcgi = "{b["fcgi-b"]}"\n\n'
            f'[[site.route]]\nprefix = "/ajp/"\n{ajp(b["ajp-b"])}\n'
            f'[[site.route]]\nprefix = "/"\nproxy = "http://{b["http-b"]}"\n')
        self.srv = self.start_config(config)
        self.ports = {"http1": self.srv.port, "h2c": self.srv.listening_port("127.0.0.2"),
                      "tls": self.srv.listening_port("127.0.0.3")}

    # ---- one case ----

    def what_backends_saw(self):
        """What every back end decoded since the last call (take())."""
        seen, garbage, leftovers = [], [], []
        for name, rec in self.backends.items():
            s, g, left = rec.take()
            seen += [(name, x) for x in s]
            garbage += [(name, why, data) for why, data in g]
            leftovers += [(name, data) for data in left]
        return seen, garbage, leftovers

    def check(self, expect, answer, saw):
        """`answer`: {"status": int or None, "reset": code or None, "goaway": code or None};
        `saw`: what_backends_saw() after the case."""
        seen, garbage, leftovers = saw
        self.assertEqual(garbage, [], "a back end received bytes it cannot decode")
        self.assertEqual(leftovers, [], "a back end holds bytes that are no whole request")
        for name, s in seen:
            # An absolute target ("http://a.test/admin/x") names the path after its authority.
            path = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*", "", s.target or "").split("?")[0]
            self.assertFalse(path.startswith(PROTECTED), f"a route rule was passed: {name} saw {s}")
        alternatives = expect if isinstance(expect, tuple) else (expect,)
        failures = []
        for e in alternatives:
            try:
                if isinstance(e, Refused):
                    self.check_refused(e, answer, seen)
                else:
                    self.check_one(e, answer, seen)
                return
            except AssertionError as err:
                failures.append(str(err))
        self.fail(" | or | ".join(failures))

    def check_refused(self, e, answer, seen):
        self.assertEqual(seen, [], f"expected {e}; answer {answer}")
        ok = answer["status"] in e.statuses or (
            e.reset and answer["reset"] is not None and
            (e.reset_code is None or answer["reset"] == e.reset_code))
        self.assertTrue(ok, f"expected {e}; answer {answer}")

    def check_one(self, e, answer, seen):
        self.assertEqual(len(seen), 1, f"expected {e}; the back ends saw {seen}; answer {answer}")
        name, s = seen[0]
        got = (name, s.method, s.target, s.authority)
        self.assertEqual(got, (e.backend, e.method, e.target, e.authority),
                         f"expected {e}; answer {answer}")
        self.assertEqual(s.body, e.body, f"the body {e.backend} received")
        for field in e.absent:
            self.assertEqual(s.header_all(field), [], f"{field} reached {name}: {s}")
        self.assertEqual(answer["status"], 200, f"the answer to {e}: {answer}")
        if name.startswith("ajp"):
            self.assertEqual(s.extra["secret"], AJP_SECRET)

    def run_table(self, cases, send):
        """Each case (label, request, expect) through send(request) -> answer, in a subTest.

        A request that reaches a back end after its case was checked is not lost: it is in what
        the next case sees (and fails that one), or after the last case in the table's own
        check. So a case that expects nothing waits only briefly, and one that expects a request
        a little longer, for a smuggled second request behind the answered one."""
        self.what_backends_saw()
        for label, request, expect in cases:
            with self.subTest(label):
                answer = send(request)
                refused = all(isinstance(e, Refused)
                              for e in (expect if isinstance(expect, tuple) else (expect,)))
                time.sleep(SETTLE_REFUSED if refused else SETTLE)
                self.check(expect, answer, self.what_backends_saw())
        with self.subTest("after the last case"):
            time.sleep(SETTLE)
            self.check(Refused(None), {"status": None, "reset": None}, self.what_backends_saw())

    # ---- clients ----

    def h1(self, data):
        """Sends `data` on a new connection to the HTTP/1.1 listener: the answer's status, or
        None when the server closed without one."""
        with RawClient(self.ports["http1"], timeout=5) as c:
            c.send(data)
            try:
                resp = c.read_final_response()
            except ConnectionClosed:
                return {"status": None, "reset": None, "goaway": None}
            return {"status": resp.status, "reset": None, "goaway": None, "body": resp.body}

    def h2(self, transport, fields, body=None, sni="a.test"):
        """One request on stream 1 of a new HTTP/2 connection (`transport` "h2c" or "tls"), fields
        sent as given: python3-h2 checks and normalises none of them."""
        sock = socket.create_connection(("127.0.0.2" if transport == "h2c" else "127.0.0.3",
                                          self.ports[transport]), timeout=5)
        if transport == "tls":
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            sock = ctx.wrap_socket(sock, server_hostname=sni)
            self.assertEqual(sock.selected_alpn_protocol(), "h2")
        config = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                           validate_outbound_headers=False,
                                           normalize_outbound_headers=False,
                                           validate_inbound_headers=False)
        conn = h2.connection.H2Connection(config)
        answer = {"status": None, "reset": None, "goaway": None}
        try:
            conn.initiate_connection()
            conn.send_headers(1, [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fields],
                              end_stream=body is None)
            if body is not None:
                conn.send_data(1, body, end_stream=True)
            sock.sendall(conn.data_to_send())
            deadline = time.monotonic() + 5
            done = False
            while not done and time.monotonic() < deadline:
                try:
                    data = sock.recv(65536)
                except (socket.timeout, ConnectionResetError, ssl.SSLError):
                    data = b""
                if not data:
                    break
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    answer["client_error"] = repr(e)
                    break
                for ev in events:
                    if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == 1:
                        status = dict(ev.headers).get(b":status", b"0")
                        if not status.startswith(b"1"):
                            answer["status"] = int(status)
                    elif isinstance(ev, h2.events.DataReceived):
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == 1:
                        done = True
                    elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == 1:
                        answer["reset"] = int(ev.error_code)
                        done = True
                    elif isinstance(ev, h2.events.ConnectionTerminated):
                        answer["goaway"] = int(ev.error_code)
                        done = True
                pending = conn.data_to_send()
                if pending:
                    sock.sendall(pending)
        finally:
            sock.close()
        return answer


def h2_fields(method="GET", path="/ok", authority="a.test", scheme="http", extra=()):
    fields = [(":method", method), (":scheme", scheme), (":path", path)]
    if authority is not None:
        fields.append((":authority", authority))
    return fields + list(extra)


# The routes every table goes through: the path a plain request takes to each back end of a.test.
ROUTES = (("proxy", "/ok", "http-a"), ("fastcgi", "/php/ok.php", "fcgi-a"),
          ("ajp", "/ajp/ok", "ajp-a"))


class TestRecorders(SmugglingTestCase):
    """The table means something only if the recorders see what reaches them."""

    def test_a_recorder_sees_a_smuggled_request_and_garbage(self):
        rec = self.backends["http-a"]
        smuggled = (b"GET /chat HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\n\r\n" + inner_request("/admin/delete-everything"))
        with socket.create_connection(("127.0.0.1", rec.port), timeout=5) as s:
            s.sendall(smuggled)
            got = b""
            while got.count(b"HTTP/1.1 200") < 2:
                got += s.recv(4096)
        saw = self.what_backends_saw()
        self.assertEqual([(name, x.method, x.target) for name, x in saw[0]],
                         [("http-a", "GET", "/chat"), ("http-a", "POST", "/admin/delete-everything")])
        with self.assertRaises(AssertionError):  # what check() says of it
            self.check(Refused(400), {"status": 400, "reset": None}, saw)
        with socket.create_connection(("127.0.0.1", rec.port), timeout=5) as s:
            s.sendall(b"GET /a b HTTP/1.1\r\nHost: a.test\r\n\r\n")
            self.assertEqual(s.recv(10), b"")  # it hangs up
        self.assertEqual(len(rec.take()[1]), 1, "a request line with a space is garbage")

    def test_each_back_end_records_one_plain_request(self):
        cases = []
        for site in ("a", "b"):
            host = f"{site}.test"
            for route, path, backend in ROUTES:
                backend = backend[:-1] + site
                cases.append((f"{route} GET {host}", head(f"GET {path} HTTP/1.1", [("Host", host)]),
                              Req(backend, "GET", path, host)))
                body = b"name=value&x=1"
                cases.append((f"{route} POST {host}",
                               head(f"POST {path} HTTP/1.1", [("Host", host),
                                                              ("Content-Length", len(body))]) + body,
                               Req(backend, "POST", path, host, body)))
                cases.append((f"{route} chunked POST {host}",
                              head(f"POST {path} HTTP/1.1", [("Host", host),
                                                             ("Transfer-Encoding", "chunked")])
                              + chunked(body), Req(backend, "POST", path, host, body)))
        self.run_table(cases, self.h1)

    def test_route_rules_hold_for_plain_requests(self):
        cases = [(f"GET {p}x", head(f"GET {p}x HTTP/1.1", [("Host", "a.test")]), Refused(status))
                 for p, status in (("/admin/", 403), ("/private/", 403), ("/secret/", 401))]
        self.run_table(cases, self.h1)


class TestUpgradeWithBody(SmugglingTestCase):
    """An Upgrade request with a body: the proxy would tunnel it (websocket is on by default),
    so the body could reach the back end as the next request. The lead's decision: 400, and the
    back end sees nothing. A route that does not tunnel sends the body as a body."""

    def upgrade(self, path, framing, body, method="GET", host="a.test"):
        fields = [("Host", host), ("Connection", "Upgrade"), ("Upgrade", "websocket"),
                  ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
        if framing == "length":
            return head(f"{method} {path} HTTP/1.1", fields + [("Content-Length", len(body))]) + body
        return head(f"{method} {path} HTTP/1.1",
                    fields + [("Transfer-Encoding", "chunked")]) + chunked(body)

    def test_table(self):
        cases = []
        for target in ("/admin/delete-everything", "/private/keys", "/secret/report"):
            inner = inner_request(target)
            for framing in ("length", "chunked"):
                cases.append((f"proxy {framing} body hiding {target}",
                              self.upgrade("/chat", framing, inner), Refused(400)))
                cases.append((f"fastcgi {framing} body hiding {target}",
                              self.upgrade("/php/chat.php", framing, inner),
                              Req("fcgi-a", "GET", "/php/chat.php", "a.test", inner)))
                cases.append((f"ajp {framing} body hiding {target}",
                              self.upgrade("/ajp/chat", framing, inner),
                              Req("ajp-a", "GET", "/ajp/chat", "a.test", inner)))
                cases.append((f"proxy websocket=false {framing} body hiding {target}",
                              self.upgrade("/plain/chat", framing, inner),
                              Req("http-a", "GET", "/plain/chat", "a.test", inner)))
        inner = inner_request("/admin/delete-everything")
        cases += [
            ("proxy POST with a length", self.upgrade("/chat", "length", inner, method="POST"),
             Refused(400)),
            ("proxy to b.test with a length", self.upgrade("/chat", "length", inner, host="b.test"),
             Refused(400)),
            ("proxy Content-Length: 0",
             head("GET /chat HTTP/1.1", [("Host", "a.test"), ("Connection", "Upgrade"),
                                         ("Upgrade", "websocket"), ("Content-Length", "0")]),
             Req("http-a", "GET", "/chat", "a.test")),
            ("proxy no body",
             head("GET /chat HTTP/1.1", [("Host", "a.test"), ("Connection", "Upgrade"),
                                         ("Upgrade", "websocket")]),
             Req("http-a", "GET", "/chat", "a.test")),
        ]
        self.run_table(cases, self.h1)


class TestH2cUpgrade(SmugglingTestCase):
    """`Upgrade: h2c` and `HTTP2-Settings` are for one hop: a back end that took the upgrade
    would speak HTTP/2 to the client beyond every route rule."""

    def test_table(self):
        fields = [("Host", "a.test"), ("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                  ("HTTP2-Settings", HTTP2_SETTINGS)]
        absent = ("upgrade", "http2-settings")
        cases = []
        for route, path, backend in ROUTES:
            cases.append((f"{route} GET", head(f"GET {path} HTTP/1.1", fields),
                          Req(backend, "GET", path, "a.test", absent=absent)))
            cases.append((f"{route} GET, Connection: Upgrade only",
                          head(f"GET {path} HTTP/1.1", [("Host", "a.test"), ("Connection", "Upgrade"),
                                                        ("Upgrade", "h2c"),
                                                        ("HTTP2-Settings", HTTP2_SETTINGS)]),
                          Req(backend, "GET", path, "a.test", absent=absent)))
            inner = inner_request("/admin/delete-everything")
            # With a body: forwarded as a body (h2c is never offered, so nothing is tunnelled),
            # or refused as an Upgrade request with a body; never a second request.
            cases.append((f"{route} POST with a body hiding a request",
                          head(f"POST {path} HTTP/1.1", fields + [("Content-Length", len(inner))]) + inner,
                          (Req(backend, "POST", path, "a.test", inner, absent=absent), Refused(400))))
        self.run_table(cases, self.h1)


class TestAbsoluteForm(SmugglingTestCase):
    """RFC 9112 3.2.2: the absolute-form target's authority replaces Host, for routing and for
    what the back end is told."""

    def test_table(self):
        cases = []
        for route, path, backend in ROUTES:
            cases.append((f"{route} http://a.test with Host b.test",
                          head(f"GET http://a.test{path} HTTP/1.1", [("Host", "b.test")]),
                          Req(backend, "GET", path, "a.test")))
            cases.append((f"{route} http://b.test with Host a.test",
                          head(f"GET http://b.test{path} HTTP/1.1", [("Host", "a.test")]),
                          Req(backend[:-1] + "b", "GET", path, "b.test")))
            cases.append((f"{route} http://a.test with a query, Host b.test",
                          head(f"GET http://a.test{path}?q=1 HTTP/1.1", [("Host", "b.test")]),
                          Req(backend, "GET", path + "?q=1", "a.test")))
        for p, status in (("/admin/", 403), ("/private/", 403), ("/secret/", 401)):
            cases.append((f"http://a.test{p} with Host b.test",
                          head(f"GET http://a.test{p}x HTTP/1.1", [("Host", "b.test")]), Refused(status)))
        self.run_table(cases, self.h1)


    def test_authority_and_asterisk_forms(self):
        # CONNECT would make the back end a tunnel past every route; `*` names no resource.
        cases = [
            ("CONNECT a.test:443", head("CONNECT a.test:443 HTTP/1.1", [("Host", "a.test:443")]),
             Refused(400, 405, 501)),
            ("CONNECT to a back end's address",
             head(f"CONNECT {self.backends['http-a'].address} HTTP/1.1", [("Host", "a.test")]),
             Refused(400, 405, 501)),
            ("GET *", head("GET * HTTP/1.1", [("Host", "a.test")]), Refused(400)),
        ]
        self.run_table(cases, self.h1)


class TestHttp12(SmugglingTestCase):
    """RFC 9110 2.5: a higher minor version is processed as HTTP/1.1, not 505."""

    def test_table(self):
        cases = [(f"{route} HTTP/1.2", head(f"GET {path} HTTP/1.2", [("Host", "a.test")]),
                  Req(backend, "GET", path, "a.test")) for route, path, backend in ROUTES]
        cases.append(("proxy HTTP/1.9 POST",
                      head("POST /ok HTTP/1.9", [("Host", "a.test"), ("Content-Length", "4")]) + b"data",
                      Req("http-a", "POST", "/ok", "a.test", b"data")))
        self.run_table(cases, self.h1)


class TestHttp2(SmugglingTestCase):
    """HTTP/2 requests become HTTP/1.1 (proxy), CGI parameters (FastCGI) or AJP fields: each is
    checked before, so nothing a back end would read differently gets through (RFC 9113 8.2,
    8.3)."""

    TRANSPORTS = ("h2c", "tls")

    def setUp(self):
        if h2 is None:
            missing("python module h2 (Debian package python3-h2)")
        super().setUp()

    def run_h2(self, cases):
        for transport in self.TRANSPORTS:
            def send(request, transport=transport):
                fields, body = request
                return self.h2(transport, fields, body)
            self.run_table([(f"{transport} {label}", request, expect)
                            for label, request, expect in cases], send)

    def test_plain_requests_and_route_rules(self):
        cases = []
        for route, path, backend in ROUTES:
            for site in ("a", "b"):
                host = f"{site}.test"
                cases.append((f"{route} {host}", (h2_fields(path=path, authority=host), None),
                              Req(backend[:-1] + site, "GET", path, host)))
            cases.append((f"{route} POST", (h2_fields("POST", path, extra=[("content-length", "4")]),
                                            b"data"), Req(backend, "POST", path, "a.test", b"data")))
            cases.append((f"{route} te: trailers", (h2_fields(path=path, extra=[("te", "trailers")]),
                                                    None), Req(backend, "GET", path, "a.test")))
        for p, status in (("/admin/", 403), ("/private/", 403), ("/secret/", 401)):
            cases.append((f"GET {p}x", (h2_fields(path=p + "x"), None), Refused(status)))
        self.run_h2(cases)

    def test_authority_and_host(self):
        cases = []
        for route, path, backend in ROUTES:
            cases += [
                (f"{route} :authority a.test, host b.test",
                 (h2_fields(path=path, extra=[("host", "b.test")]), None),
                 Refused(400, reset=True, reset_code=None)),
                (f"{route} :authority b.test, host a.test",
                 (h2_fields(path=path, authority="b.test", extra=[("host", "a.test")]), None),
                 Refused(400, reset=True, reset_code=None)),
                (f"{route} :authority and host both a.test",
                 (h2_fields(path=path, extra=[("host", "a.test")]), None),
                 Req(backend, "GET", path, "a.test")),
                (f"{route} host a.test and no :authority",
                 (h2_fields(path=path, authority=None, extra=[("host", "a.test")]), None),
                 Req(backend, "GET", path, "a.test")),
            ]
        cases.append(("/admin/ by :authority a.test, host b.test",
                      (h2_fields(path="/admin/x", extra=[("host", "b.test")]), None),
                      Refused(400, 403, reset=True, reset_code=None)))
        self.run_h2(cases)

    def test_whitespace_and_control_bytes_in_pseudo_headers(self):
        cases = []
        for route, path, _ in ROUTES:
            for bad in (f"/admin {path}", f"{path} HTTP/1.0", f"{path} /admin/x", f"{path}\t/admin/x",
                        f"{path}\r\nX-Injected: 1", f"{path}\n", f"{path}\x00", f"{path}\x7f",
                        f"{path}#frag", path[1:], f"http://a.test{path}"):
                cases.append((f"{route} :path {bad!r}", (h2_fields(path=bad), None), bad_h2()))
            for bad in ("GET /admin/x", "GET\t", f"GET {path}", "G ET", "GET\r\nX-Injected: 1",
                        "GET\x00", "GET\n"):
                cases.append((f"{route} :method {bad!r}", (h2_fields(method=bad, path=path), None),
                              bad_h2()))
            for bad in ("a.test x", "a.test/x", "a.test\tx", "a.test\r\nX-Injected: 1", "a.test\x00",
                        "a.test\n", "someone@a.test", "a.test:80:80", "a.test?x", "a.test#x", ""):
                cases.append((f"{route} :authority {bad!r}", (h2_fields(path=path, authority=bad), None),
                              bad_h2()))
            for bad in ("http x", "http\r\nX-Injected: 1", "http\x00"):
                cases.append((f"{route} :scheme {bad!r}", (h2_fields(path=path, scheme=bad), None),
                              bad_h2()))
            for bad in ("a\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b"):
                cases.append((f"{route} field value {bad!r}",
                              (h2_fields(path=path, extra=[("x-test", bad)]), None), bad_h2()))
                cases.append((f"{route} host value {bad!r}",
                              (h2_fields(path=path, authority=None, extra=[("host", bad)]), None),
                              bad_h2()))
        self.run_h2(cases)

    def test_connect_and_asterisk(self):
        cases = [
            ("CONNECT", ([(":method", "CONNECT"), (":authority", "a.test:443")], None),
             Refused(400, 405, 501, reset=True, reset_code=None)),
            # RFC 8441's extended CONNECT: :protocol is unknown unless the server's SETTINGS
            # offered it, and Peregrine offers no WebSocket over HTTP/2.
            ("CONNECT with :protocol websocket",
             ([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
               (":path", "/chat"), (":authority", "a.test")], None), bad_h2()),
            ("GET *", (h2_fields(path="*"), None), bad_h2()),
        ]
        self.run_h2(cases)

    def test_connection_specific_fields(self):
        cases = []
        for route, path, _ in ROUTES:
            for field in (("connection", "keep-alive"), ("connection", "upgrade"),
                          ("transfer-encoding", "chunked"), ("upgrade", "websocket"),
                          ("upgrade", "h2c"), ("keep-alive", "timeout=5"), ("te", "gzip"),
                          ("te", "trailers, gzip"), ("proxy-connection", "keep-alive")):
                cases.append((f"{route} {field[0]}: {field[1]}",
                              (h2_fields(path=path, extra=[field]), None), bad_h2()))
            inner = inner_request("/admin/delete-everything")
            cases.append((f"{route} POST, transfer-encoding: chunked, a hidden request",
                          (h2_fields("POST", path, extra=[("transfer-encoding", "chunked")]),
                           chunked(inner)), bad_h2()))
        self.run_h2(cases)


if __name__ == "__main__":
    main()
