"""peregrine::HttpClient (include/peregrine/http_client.h) through examples/gateway, a coroutine
route that forwards /gateway/REST to a back end and answers with its result. The back ends are
tests/integration/backends/http_backend.py (plain and TLS, counting its connections)."""

import hashlib
import http.client
import json
import os
import signal
import socket
import threading
import time

from harness import PEREGRINE_BIN, ServerTestCase, build_request, main, require_tool
from test_proxy import Backend, free_port, pattern_sha256, vm_hwm_kb
from test_proxy_https import TlsBackend, make_ca

GATEWAY_BIN = os.path.join(os.path.dirname(PEREGRINE_BIN), "gateway")


def closed_by_peer(port):
    """Connections accepted on 127.0.0.1:`port` whose peer closed its side (CLOSE_WAIT): the
    back end sleeping in /hang reads nothing, so only the kernel knows the gateway hung up."""
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            if local_port == port and fields[3] == "08":
                count += 1
    return count


class HttpClientTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(GATEWAY_BIN), f"{GATEWAY_BIN} does not exist")
        self.backend = Backend(self.tmp, "A").start()
        self.addCleanup(self.backend.kill)

    def gateway(self, backend_url=None, *options, workers=1):
        url = backend_url or f"http://{self.backend.address}"
        return self.start_argv([GATEWAY_BIN, "--backend", url, "--listen", "127.0.0.1:0",
                                "--workers", str(workers), *options], name="gateway")

    def call(self, port, method, path, body=None, headers=None, timeout=10):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def test_get_carries_method_target_and_host(self):
        srv = self.gateway()
        status, headers, body = self.call(srv.port, "GET", "/gateway/a%20b/echo?x=1&y=2")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["x-backend-status"], "200")
        self.assertEqual(headers["content-type"], "application/json")
        echo = json.loads(body)
        self.assertEqual(echo["method"], "GET")
        self.assertEqual(echo["target"], "/a%20b/echo?x=1&y=2")
        names = {name.lower(): value for name, value in echo["headers"]}
        self.assertEqual(names["host"], self.backend.address)
        self.assertNotIn("x-forwarded-for", names)  # a client call, not a proxied request

    def test_backend_status_is_a_response(self):
        srv = self.gateway()
        status, headers, body = self.call(srv.port, "GET", "/gateway/status?code=418")
        self.assertEqual((status, headers["x-backend-status"]), (418, "418"))
        self.assertEqual(body, b"status 418 from A")

    def test_post_with_a_body(self):
        srv = self.gateway()
        for size in (0, 10, 300_000):  # the largest pauses on the send high-water mark
            data = os.urandom(size)
            status, _, body = self.call(srv.port, "POST", "/gateway/upload", body=data,
                                        headers={"Content-Type": "application/octet-stream"})
            self.assertEqual(status, 200, body)
            answer = json.loads(body)
            self.assertEqual(answer["length"], size)
            self.assertEqual(answer["sha256"], hashlib.sha256(data).hexdigest())
        status, _, body = self.call(srv.port, "PUT", "/gateway/x/echo", body=b"abc")
        echo = json.loads(body)
        self.assertEqual((echo["method"], echo["body_length"]), ("PUT", 3))

    def test_keepalive_reuses_one_connection(self):
        srv = self.gateway()
        self.backend.reset()
        for i in range(10):
            status, _, body = self.call(srv.port, "GET", f"/gateway/n{i}")
            self.assertEqual((status, body), (200, b"A"))
        stats = self.backend.stats()
        self.assertEqual(stats["requests"], 10)
        self.assertEqual(stats["connections"], 1)

    def test_keepalive_zero_opens_a_connection_per_call(self):
        srv = self.gateway(None, "--keepalive", "0")
        self.backend.reset()
        for _ in range(3):
            self.assertEqual(self.call(srv.port, "GET", "/gateway/x")[0], 200)
        self.wait_for(lambda: self.backend.stats()["connections"] == 3, msg="3 connections")

    def test_streamed_and_chunked_bodies(self):
        srv = self.gateway()
        for chunked in (0, 1):
            size = 1_000_000  # over the proxy's 64 KiB buffer: the streamed path
            status, _, body = self.call(srv.port, "GET",
                                        f"/gateway/download?bytes={size}&chunked={chunked}")
            self.assertEqual((status, len(body)), (200, size))
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(size))

    def test_callback_style(self):
        srv = self.gateway()
        self.assertEqual(self.call(srv.port, "GET", "/size/download?bytes=12345")[2],
                         b"200 12345\n")
        self.assertEqual(self.call(srv.port, "GET", "/size/status?code=404")[2], b"404 17\n")
        refused = self.gateway(f"http://127.0.0.1:{free_port()}")
        self.assertEqual(self.call(refused.port, "GET", "/size/x")[:3:2], (502, b"failed\n"))

    def test_max_connections_queues_calls(self):
        srv = self.gateway(None, "--max-connections", "2")
        self.backend.reset()
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            self.call(srv.port, "GET", "/gateway/slow?ms=300")[0])) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [200] * 6)
        stats = self.backend.stats()
        self.assertEqual((stats["peak"], stats["requests"]), (2, 6))

    def test_streamed_response(self):
        srv = self.gateway(None, "--max-body", "1000")  # the limit is for buffered bodies only
        for chunked in (0, 1):
            size = 3_000_000
            status, headers, body = self.call(srv.port, "GET",
                                              f"/stream/download?bytes={size}&chunked={chunked}")
            self.assertEqual((status, len(body)), (200, size))
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(size))
        status, _, body = self.call(srv.port, "GET", "/stream/status?code=404")
        self.assertEqual((status, body), (404, b"status 404 from A"))
        status, _, body = self.call(srv.port, "GET", "/stream/download?bytes=0")
        self.assertEqual((status, body), (200, b""))

    def test_streamed_response_waits_for_a_slow_reader(self):
        srv = self.gateway()
        size = 50_000_000
        # The growth of the peak RSS, not its value: an AddressSanitizer build starts near 42 MB.
        start_kb = vm_hwm_kb(srv.pid)
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(build_request("GET", f"/stream/download?bytes={size}"))
        s.recv(1000)
        time.sleep(1)  # reading nothing more: the gateway must stop reading the back end
        self.assertLess(vm_hwm_kb(srv.pid) - start_kb, 24_000, "the gateway buffered the body")
        received = 1000
        s.settimeout(10)
        while True:  # the rest arrives once we read
            data = s.recv(1 << 20)
            if not data:
                break
            received += len(data)
            if received >= size:
                break
        s.close()
        self.assertGreaterEqual(received, size)

    def test_streamed_response_of_a_failed_call(self):
        srv = self.gateway(f"http://127.0.0.1:{free_port()}")
        status, headers, _ = self.call(srv.port, "GET", "/stream/x")
        self.assertEqual(status, 502)
        cut = self.gateway()
        with self.assertRaises(http.client.IncompleteRead):
            self.call(cut.port, "GET", "/stream/partial")  # 10 of 1000 bytes, then a close

    def test_connect_refused_is_an_error(self):
        srv = self.gateway(f"http://127.0.0.1:{free_port()}")
        for _ in range(2):  # the origin is not marked down: each call tries again
            status, headers, body = self.call(srv.port, "GET", "/gateway/x")
            self.assertEqual(status, 502, body)
            self.assertEqual(headers["x-client-error"], "failed")
        self.wait_for(lambda: "connect failed: Connection refused" in srv.stderr(), msg="the log line")

    def test_invalid_url_sends_nothing(self):
        srv = self.gateway("ftp://127.0.0.1:21")
        status, headers, body = self.call(srv.port, "GET", "/gateway/x")
        self.assertEqual((status, headers["x-client-error"]), (502, "invalid request"))
        self.assertIn(b"unsupported scheme", body)

    def test_read_timeout_is_an_error(self):
        srv = self.gateway(None, "--read-timeout-ms", "300")
        started = time.monotonic()
        status, headers, _ = self.call(srv.port, "GET", "/gateway/hang")
        self.assertEqual((status, headers["x-client-error"]), (504, "timeout"))
        self.assertLess(time.monotonic() - started, 3)
        self.wait_for(lambda: "timed out waiting for the response" in srv.stderr(), msg="the log line")
        # The connection was not kept: the next call gets a clean answer.
        self.assertEqual(self.call(srv.port, "GET", "/gateway/x")[2], b"A")

    def test_call_timeout_is_an_error(self):
        srv = self.gateway(None, "--timeout-ms", "300")
        started = time.monotonic()
        status, headers, _ = self.call(srv.port, "GET", "/gateway/slow?ms=3000")
        self.assertEqual((status, headers["x-client-error"]), (504, "timeout"))
        self.assertLess(time.monotonic() - started, 2.5)
        self.assertEqual(self.call(srv.port, "GET", "/gateway/slow?ms=10")[0], 200)

    def test_oversized_body_is_an_error(self):
        srv = self.gateway(None, "--max-body", "100000")
        status, _, body = self.call(srv.port, "GET", "/gateway/download?bytes=100000")
        self.assertEqual((status, len(body)), (200, 100000))  # at the limit: fine
        for query in ("bytes=100001", "bytes=5000000", "bytes=100001&chunked=1",
                      "bytes=5000000&chunked=1"):
            status, headers, body = self.call(srv.port, "GET", f"/gateway/download?{query}")
            self.assertEqual(status, 502, (query, body))
            self.assertEqual(headers["x-client-error"], "too large", query)
        self.assertEqual(self.call(srv.port, "GET", "/gateway/x")[2], b"A")
        # HEAD announces a length over the limit, but no body comes.
        status, headers, body = self.call(srv.port, "HEAD", "/gateway/download?bytes=5000000")
        self.assertEqual((status, headers["x-backend-status"], body), (200, "200", b""))

    def test_client_disconnect_cancels_the_backend_call(self):
        srv = self.gateway()
        self.backend.reset()
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(build_request("GET", "/gateway/hang"))
        self.wait_for(lambda: self.backend.stats()["active"] == 1, msg="the call reached it")
        time.sleep(0.2)
        self.assertEqual(closed_by_peer(self.backend.port), 0)
        s.close()
        # The gateway closes its connection to the back end: the call was aborted.
        self.wait_for(lambda: closed_by_peer(self.backend.port) == 1, msg="the call was aborted")
        self.assertEqual(self.call(srv.port, "GET", "/gateway/x")[2], b"A")

    def test_hundred_calls_in_flight(self):
        srv = self.gateway()
        self.backend.reset()
        results = []
        lock = threading.Lock()

        def one(i):
            try:
                status, _, body = self.call(srv.port, "GET", f"/gateway/slow?ms=500&i={i}",
                                            timeout=30)
            except OSError as e:
                status, body = 0, str(e).encode()
            with lock:
                results.append((status, body))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(100)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        self.assertEqual(results, [(200, b"A")] * 100)
        self.assertLess(took, 15)  # one after the other would take 50 s
        self.assertGreaterEqual(self.backend.stats()["peak"], 50)

    def test_stop_with_a_call_in_flight(self):
        srv = self.gateway()
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(build_request("GET", "/gateway/hang"))
        self.wait_for(lambda: self.backend.stats()["active"] == 1, msg="the call reached it")
        self.stop_ok(srv, signal.SIGINT)
        s.close()


class HttpsClientTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        require_tool("openssl", "openssl")
        self.certs = make_ca(os.path.join(self.tmp, "pki"), "client")
        self.backend = TlsBackend(self, self.certs)
        self.url = f"https://127.0.0.1:{self.backend.port}"

    def gateway(self, *options):
        return self.start_argv([GATEWAY_BIN, "--backend", self.url, "--listen", "127.0.0.1:0",
                                "--workers", "1", *options], name="gateway")

    def get(self, port, path):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.getheader("X-Client-Error"), resp.read()
        finally:
            conn.close()

    def test_verified_against_the_ca(self):
        srv = self.gateway("--ca-file", self.certs["ca"])
        status, _, body = self.get(srv.port, "/gateway/x/echo")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["method"], "GET")
        status, _, body = self.get(srv.port, "/gateway/download?bytes=200000")
        self.assertEqual((status, len(body)), (200, 200000))

    def test_unknown_issuer_fails_verification(self):
        srv = self.gateway()  # the system's store does not know the test CA
        status, error, _ = self.get(srv.port, "/gateway/x")
        self.assertEqual((status, error), (502, "failed"))
        self.wait_for(lambda: "certificate verify failed" in srv.stderr(), msg="the log line")

    def test_verification_off(self):
        srv = self.gateway("--tls-verify", "off")
        for _ in range(3):
            status, _, body = self.get(srv.port, "/gateway/x")
            self.assertEqual((status, body), (200, b"T"))


if __name__ == "__main__":
    main()
