"""examples/json_api: a JSON API with a route parameter (/api/items/{id}) on coroutine handlers,
over HTTP/1.1 (http.client) and HTTP/2 (curl --http2-prior-knowledge needs an h2c listener,
which the example does not configure, so HTTP/2 is covered by test_library_api.py)."""

import json
import os

from harness import PEREGRINE_BIN, RawClient, ServerTestCase, build_request, main

JSON_API_BIN = os.path.join(os.path.dirname(PEREGRINE_BIN), "json_api")


class JsonApiTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(JSON_API_BIN), f"{JSON_API_BIN} does not exist")
        self.srv = self.start_argv([JSON_API_BIN, "--listen", "127.0.0.1:0", "--workers", "2"],
                                   name="json_api")
        self.port = self.srv.port

    def call(self, method, path, body=None):
        status, headers, data = self.http(self.port, method, path, body=body)
        doc = json.loads(data) if data else None
        if data:
            self.assertEqual(headers["Content-Type"], "application/json")
        return status, doc

    def test_crud(self):
        self.assertEqual(self.call("GET", "/api/items"), (200, {"items": []}))
        self.assertEqual(self.call("PUT", "/api/items/7", b"seven"), (201, {"id": 7, "name": "seven"}))
        self.assertEqual(self.call("PUT", "/api/items/3", b'say "hi"\n'),
                         (201, {"id": 3, "name": 'say "hi"\n'}))
        self.assertEqual(self.call("PUT", "/api/items/7", b"SEVEN"), (200, {"id": 7, "name": "SEVEN"}))
        self.assertEqual(self.call("GET", "/api/items/7"), (200, {"id": 7, "name": "SEVEN"}))
        self.assertEqual(self.call("GET", "/api/items"),
                         (200, {"items": [{"id": 3, "name": 'say "hi"\n'}, {"id": 7, "name": "SEVEN"}]}))
        self.assertEqual(self.call("DELETE", "/api/items/7"), (204, None))
        status, doc = self.call("GET", "/api/items/7")
        self.assertEqual(status, 404)
        self.assertEqual(doc, {"error": "no item 7"})
        self.assertEqual(self.call("DELETE", "/api/items/7")[0], 404)

    def test_bad_ids(self):
        for bad in ("abc", "-1", "007", "1.5", "99999999999999999999999", "7x"):
            status, doc = self.call("GET", f"/api/items/{bad}")
            self.assertEqual(status, 400, bad)
            self.assertIn("positive decimal", doc["error"])

    def test_methods(self):
        status, doc = self.call("POST", "/api/items", b"x")
        self.assertEqual(status, 405)
        status, headers, _ = self.http(self.port, "PATCH", "/api/items/1", body=b"x")
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, HEAD, PUT, DELETE")
        self.assertEqual(self.call("GET", "/api/other")[0], 404)  # under the route, not an item
        self.assertEqual(self.get(self.port, "/other")[0], 404)  # no route: the server's 404

    def test_body_limits(self):
        status, doc = self.call("PUT", "/api/items/1", b"x" * 2000)
        self.assertEqual(status, 413)
        self.assertEqual(self.call("PUT", "/api/items/1", b"")[0], 400)
        # A chunked body is streamed to the coroutine like any other.
        with RawClient(self.port) as c:
            c.send(build_request("PUT", "/api/items/5", {"Transfer-Encoding": "chunked"})
                   + b"3\r\nfiv\r\n1\r\ne\r\n0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 201)
            self.assertEqual(json.loads(r.body), {"id": 5, "name": "five"})
            r = c.request("GET", "/api/items/5")  # same connection, kept alive
            self.assertEqual(json.loads(r.body)["name"], "five")

    def test_shared_between_workers(self):
        self.assertEqual(self.call("PUT", "/api/items/1", b"one")[0], 201)
        for _ in range(20):
            with RawClient(self.port) as c:  # new connections land on either worker
                r = c.request("GET", "/api/items/1")
                self.assertEqual(r.status, 200)


if __name__ == "__main__":
    main()
