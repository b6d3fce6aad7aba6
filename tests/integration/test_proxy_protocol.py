"""The PROXY protocol on listeners with proxy_protocol = true (docs/access.md):
v1 and v2 headers from raw sockets. A valid header's source address is the client for the access
log and the back ends; a malformed, wrong, too long or too slow header closes the connection
without a byte of answer and with an error-log line; senders outside proxy_protocol_from are
closed at once.
"""

import json
import os
import socket
import struct
import sys
import time

from harness import HERE, ServerTestCase, main, make_config, q

sys.path.insert(0, HERE)
from test_proxy import Backend, upstream_toml  # noqa: E402

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(command, family, body):
    return V2_SIG + bytes([0x20 | command, family]) + struct.pack("!H", len(body)) + body


def v2_tcp4(src, dst, sport, dport, tlvs=b""):
    return v2(1, 0x11, socket.inet_aton(src) + socket.inet_aton(dst) +
              struct.pack("!HH", sport, dport) + tlvs)


def v2_tcp6(src, dst, sport, dport):
    return v2(1, 0x21, socket.inet_pton(socket.AF_INET6, src) +
              socket.inet_pton(socket.AF_INET6, dst) + struct.pack("!HH", sport, dport))


def read_json_lines(path):
    try:
        with open(path, "rb") as f:
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


class ProxyProtocolTest(ServerTestCase):
    def start(self, top="", limits="", routes="", listen_extra="", site=""):
        self.root = self.make_root({"hello.txt": "hello\n"})
        self.log_path = os.path.join(self.tmp, "access.log")
        text = make_config(self.root, top=top, limits=limits, routes=routes,
                           site='access_log_format = "json"\n' + site, access_log=self.log_path)
        text = text.replace(
            'listen = ["127.0.0.1:0"]',
            'listen = [{ address = "127.0.0.1:0", proxy_protocol = true%s }]' % listen_extra)
        return self.start_config(text)

    def connect(self, port, source="127.0.0.1"):
        s = socket.socket()
        s.settimeout(5)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        return s

    def exchange(self, port, header, request=None, source="127.0.0.1"):
        """Sends header + request; returns everything received until the close."""
        if request is None:
            request = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        s = self.connect(port, source)
        try:
            s.sendall(header + request)
        except OSError:
            pass
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
        return data

    def addresses(self, n):
        records = self.wait_for(
            lambda: (lambda r: r if len(r) >= n else None)(read_json_lines(self.log_path)),
            timeout=3.0, msg=f"{n} access log lines")
        return [r["remote_addr"] for r in records]

    def test_v1_and_v2_give_the_client_address(self):
        srv = self.start()
        headers = [
            b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 80\r\n",
            b"PROXY TCP6 2001:db8::7 2001:db8::1 4711 80\r\n",
            b"PROXY UNKNOWN\r\n",  # the socket's address stays
            v2_tcp4("198.51.100.9", "192.0.2.1", 40000, 80),
            v2_tcp4("198.51.100.10", "192.0.2.1", 40000, 80, tlvs=b"\x04\x00\x05hello\x20\x00\x00"),
            v2_tcp6("2001:db8::9", "::1", 40000, 80),
            v2(0, 0x00, b""),  # LOCAL: the balancer's own health check
        ]
        for header in headers:
            data = self.exchange(srv.port, header)
            self.assertTrue(data.startswith(b"HTTP/1.1 200"), (header, data[:200]))
            self.assertTrue(data.endswith(b"hello\n"), data)
        self.assertEqual(self.addresses(len(headers)), [
            "203.0.113.7", "2001:db8::7", "127.0.0.1", "198.51.100.9", "198.51.100.10",
            "2001:db8::9", "127.0.0.1"])

    def test_header_in_pieces_and_keep_alive(self):
        srv = self.start()
        s = self.connect(srv.port)
        header = v2_tcp4("198.51.100.20", "192.0.2.1", 1234, 80)
        for i in range(0, len(header), 5):
            s.sendall(header[i:i + 5])
            time.sleep(0.05)
        for _ in range(2):
            s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
            data = b""
            while not data.endswith(b"hello\n"):
                chunk = s.recv(65536)
                self.assertTrue(chunk, data)
                data += chunk
        s.close()
        self.assertEqual(self.addresses(2), ["198.51.100.20", "198.51.100.20"])

    def test_malformed_headers_close_the_connection(self):
        srv = self.start()
        bad = [
            (b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", "no PROXY protocol signature"),
            (b"PROXY TCP4 203.0.113.7 192.0.2.1 56324\r\n", "four address fields"),
            (b"PROXY TCP4 2001:db8::1 192.0.2.1 1 2\r\n", "malformed"),
            (b"PROXY TCP4 203.0.113.7 192.0.2.1 99999 80\r\n", "malformed"),
            (b"PROXY UNKNOWN " + b"x" * 200, "longer than 107"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "CRLF"),
            (V2_SIG + b"\x31\x11\x00\x0c" + b"\x00" * 12, "version"),
            (V2_SIG + b"\x21\x11\xff\xff", "too long"),
            (v2_tcp4("1.2.3.4", "5.6.7.8", 1, 2, tlvs=b"\x04\x00\x09ab"), "TLV"),
            (b"\r\n\r\n\x00\r\nQUIX\n\x21\x11\x00\x00", "signature"),
        ]
        for header, reason in bad:
            data = self.exchange(srv.port, header, request=b"")
            self.assertEqual(data, b"", (header, data))
            self.wait_for(lambda: reason in srv.stderr(), timeout=3.0,
                          msg=f"a log line with {reason!r}\n{srv.stderr()[-2000:]}")
        # still serving
        data = self.exchange(srv.port, b"PROXY TCP4 203.0.113.7 192.0.2.1 1 80\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data)

    def test_slow_header_is_closed_after_the_header_timeout(self):
        srv = self.start(limits='header_timeout = "1s"')
        s = self.connect(srv.port)
        s.sendall(b"PROXY TCP4 203.0.")
        start = time.monotonic()
        try:  # the peeked bytes are still unread at the close: a FIN or a reset
            self.assertEqual(s.recv(100), b"")
        except ConnectionResetError:
            pass
        elapsed = time.monotonic() - start
        self.assertGreater(elapsed, 0.8)
        self.assertLess(elapsed, 3.5)
        s.close()
        self.wait_for(lambda: "within the header timeout" in srv.stderr(), timeout=3.0,
                      msg=srv.stderr()[-2000:])
        # a client that closes mid-header costs nothing either
        s = self.connect(srv.port)
        s.sendall(b"PROXY TCP4")
        s.shutdown(socket.SHUT_WR)
        try:  # closed with the header's bytes unread: a FIN or a reset, never an answer
            self.assertEqual(s.recv(100), b"")
        except ConnectionResetError:
            pass
        s.close()
        self.assertTrue(srv.running())

    def test_only_from_allowed_senders(self):
        srv = self.start(top='[client_address]\nproxy_protocol_from = ["127.0.0.2"]\n')
        self.assertEqual(self.exchange(srv.port, b"PROXY TCP4 203.0.113.7 192.0.2.1 1 80\r\n"), b"")
        self.wait_for(lambda: "proxy_protocol_from" in srv.stderr(), timeout=3.0,
                      msg=srv.stderr()[-2000:])
        data = self.exchange(srv.port, b"PROXY TCP4 203.0.113.8 192.0.2.1 1 80\r\n",
                             source="127.0.0.2")
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data)
        self.assertEqual(self.addresses(1), ["203.0.113.8"])

    def test_forwarded_header_trusted_from_the_proxy_address(self):
        # The PROXY header's address is the peer the trusted_proxies check sees.
        srv = self.start(top='[client_address]\ntrusted_proxies = ["198.51.100.0/24"]\n')
        req = (b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 203.0.113.5\r\n"
               b"Connection: close\r\n\r\n")
        self.exchange(srv.port, b"PROXY TCP4 198.51.100.1 192.0.2.1 1 80\r\n", req)
        self.exchange(srv.port, b"PROXY TCP4 192.0.2.50 192.0.2.1 1 80\r\n", req)
        self.assertEqual(self.addresses(2), ["203.0.113.5", "192.0.2.50"])

    def test_h2c_after_the_header(self):
        # HTTP/2 with prior knowledge behind the header: the preface is not eaten with it, and
        # the stream's requests see the PROXY address (and a trusted X-Forwarded-For after it).
        import h2.config
        import h2.connection
        import h2.events
        srv = self.start(top='[client_address]\ntrusted_proxies = ["198.51.100.0/24"]\n',
                         listen_extra=", http2 = true")
        for forwarded, expected in ((None, "198.51.100.3"), ("203.0.113.9", "203.0.113.9")):
            s = self.connect(srv.port)
            s.sendall(b"PROXY TCP4 198.51.100.3 192.0.2.1 1 80\r\n")
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            c.initiate_connection()
            headers = [(":method", "GET"), (":path", "/hello.txt"), (":scheme", "http"),
                       (":authority", "localhost")]
            if forwarded:
                headers.append(("x-forwarded-for", forwarded))
            c.send_headers(1, headers, end_stream=True)
            s.sendall(c.data_to_send())
            body, status, done = b"", None, False
            while not done:
                data = s.recv(65536)
                self.assertTrue(data)
                for event in c.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        status = dict(event.headers)[b":status"]
                    elif isinstance(event, h2.events.DataReceived):
                        body += event.data
                        c.acknowledge_received_data(len(event.data), 1)
                    elif isinstance(event, h2.events.StreamEnded):
                        done = True
                s.sendall(c.data_to_send())
            s.close()
            self.assertEqual((status, body), (b"200", b"hello\n"))
        self.assertEqual(self.addresses(2), ["198.51.100.3", "203.0.113.9"])

    def test_tls_after_the_header(self):
        import ssl
        import subprocess
        cert, key = os.path.join(self.tmp, "c.pem"), os.path.join(self.tmp, "c.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
        srv = self.start(listen_extra=", tls = true",
                         site=f"tls = {{ certificate = {q(cert)}, key = {q(key)} }}\n")
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        for header in (b"PROXY TCP4 203.0.113.44 192.0.2.1 1 443\r\n",
                       v2_tcp6("2001:db8::44", "::1", 1, 443)):
            raw = self.connect(srv.port)
            raw.sendall(header)
            with context.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            self.assertTrue(data.startswith(b"HTTP/1.1 200") and data.endswith(b"hello\n"), data)
        self.assertEqual(self.addresses(2), ["203.0.113.44", "2001:db8::44"])

    def test_back_end_sees_the_proxy_protocol_address(self):
        backend = Backend(self.tmp, "b1").start()
        self.addCleanup(backend.kill)
        srv = self.start(top=upstream_toml("app", [backend.address]),
                         routes='[[site.route]]\nprefix = "/echo"\nproxy = "http://app"\n')
        data = self.exchange(srv.port, v2_tcp4("203.0.113.77", "192.0.2.1", 5555, 80),
                             b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:300])
        body = data.partition(b"\r\n\r\n")[2]
        echoed = json.loads(body)
        xff = [v for k, v in echoed["headers"] if k.lower() == "x-forwarded-for"]
        self.assertEqual(xff, ["203.0.113.77"])


if __name__ == "__main__":
    main()
