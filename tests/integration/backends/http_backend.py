#!/usr/bin/env python3
"""A scriptable HTTP/1.1 back end for the reverse-proxy tests (asyncio, standard library only).

    python3 http_backend.py --id A [--port 0 | --unix PATH] [--tls-cert PEM --tls-key PEM]

Prints "listening on 127.0.0.1:PORT" on stdout once it accepts connections. It speaks HTTP/1.1
with keep-alive by hand so that the tests control every byte: framing, early closes, garbage,
slowness, WebSocket upgrades. What it does depends on the path (query parameters in brackets):

  .../echo             JSON (any path ending in /echo, to see prefix rewriting): id, method, target, version, headers (in order), body length, sha256
  /upload              reads the body (Content-Length or chunked) without keeping it; JSON with
                       its length and sha256 [chunked_response=1: the answer is chunked]
  /download            [bytes=N, chunked=0|1] N bytes of a fixed pattern, streamed
  /slow                [ms=N] answers after N ms (the event loop keeps serving others)
  /status              [code=N] that status with a short body
  /redirect            [to=URL] 302 to URL (default: this back end's own http://127.0.0.1:PORT/x)
  /hop                 an answer carrying hop-by-hop headers (Connection names X-Hop, Keep-Alive)
  /garbage             bytes that are not HTTP, then a close
  /close               closes the connection without answering
  /partial             a head announcing 1000 bytes, 10 of them, then a close
  /post_close          reads the whole body, then closes without answering
  /hang                never answers
  /junk_after          a 200, then (5 ms later, same connection) bytes that are not HTTP
  /reject              413 before reading the request body, then a close
  /health              200 "ok", or 503 once /control/health?ok=0 was called
  /ws                  WebSocket echo (RFC 6455; text and binary frames, ping, close)
  anything else        200 with this back end's id as the body (after --slow-ms)
  /control/stats       JSON counters: connections, active, peak, requests, by_path
  /control/health      [ok=0|1] sets what /health answers
  /control/reset       zeroes the counters

Every answer carries "X-Backend: ID". Counters count everything except /control/ requests (and their connections).
"""

import argparse
import asyncio
import base64
import hashlib
import json
import sys
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(range(256)) * 256  # 64 KB


class Stats:
    def __init__(self):
        self.active = 0
        self.reset()

    def reset(self):
        self.connections = 0
        self.peak = self.active
        self.requests = 0
        self.by_path = {}


class Backend:
    def __init__(self, ident, slow_ms=0, close_after=0):
        self.id = ident
        self.slow_ms = slow_ms  # every default answer waits this long
        self.close_after = close_after  # close silently after this many answers on a connection
        self.port = 0
        self.healthy = True
        self.stats = Stats()

    # ---- connection handling ----

    async def handle(self, reader, writer):
        # A connection counts from its first request that is not a /control/ one, so that
        # asking for the counters does not change them.
        counted = False
        answered = 0
        try:
            while True:
                if self.close_after and answered >= self.close_after:
                    return  # no "Connection: close": the client finds out when it reuses us
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request = self.parse_head(head)
                if request is None:
                    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                    await writer.drain()
                    return
                if not counted and not request["path"].startswith("/control/"):
                    counted = True
                    self.stats.connections += 1
                    self.stats.active += 1
                    self.stats.peak = max(self.stats.peak, self.stats.active)
                keep = await self.dispatch(request, reader, writer)
                answered += 1
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if counted:
                self.stats.active -= 1
            try:
                writer.close()
            except Exception:
                pass

    @staticmethod
    def parse_head(head):
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return None
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                return None
            headers.append((name, value.strip()))
        url = urlsplit(parts[1])
        return {
            "method": parts[0],
            "target": parts[1],
            "path": url.path,
            "query": {k: v[-1] for k, v in parse_qs(url.query).items()},
            "version": parts[2],
            "headers": headers,
        }

    @staticmethod
    def header(request, name):
        name = name.lower()
        for k, v in request["headers"]:
            if k.lower() == name:
                return v
        return None

    def wants_close(self, request):
        tokens = [t.strip().lower() for t in (self.header(request, "connection") or "").split(",")]
        if request["version"] == "HTTP/1.0":
            return "keep-alive" not in tokens
        return "close" in tokens

    async def read_body(self, request, reader, sink):
        """Reads the request body, passing each piece to sink(bytes)."""
        te = (self.header(request, "transfer-encoding") or "").lower()
        if "chunked" in te:
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    return
                remaining = size
                while remaining:
                    data = await reader.read(min(remaining, 65536))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", remaining)
                    sink(data)
                    remaining -= len(data)
                await reader.readexactly(2)
        length = int(self.header(request, "content-length") or 0)
        while length:
            data = await reader.read(min(length, 65536))
            if not data:
                raise asyncio.IncompleteReadError(b"", length)
            sink(data)
            length -= len(data)

    def send(self, writer, status, body=b"", headers=(), close=False, reason="X"):
        lines = [f"HTTP/1.1 {status} {reason}", f"X-Backend: {self.id}",
                 f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    # ---- behaviours ----

    async def dispatch(self, request, reader, writer):
        path = request["path"]
        query = request["query"]
        close = self.wants_close(request)

        if path.startswith("/control/"):
            await self.read_body(request, reader, lambda data: None)
            if path == "/control/stats":
                s = self.stats
                body = json.dumps({"connections": s.connections, "active": s.active,
                                   "peak": s.peak, "requests": s.requests,
                                   "by_path": s.by_path}).encode()
            elif path == "/control/health":
                self.healthy = query.get("ok", "1") == "1"
                body = b"ok"
            elif path == "/control/reset":
                self.stats.reset()
                body = b"ok"
            else:
                self.send(writer, 404, b"no such control", close=close)
                await writer.drain()
                return not close
            self.send(writer, 200, body, [("Content-Type", "application/json")], close=close)
            await writer.drain()
            return not close

        self.stats.requests += 1
        self.stats.by_path[path] = self.stats.by_path.get(path, 0) + 1

        if path == "/ws" and (self.header(request, "upgrade") or "").lower() == "websocket":
            await self.websocket(request, reader, writer)
            return False
        if path == "/close":
            return False
        if path == "/garbage":
            writer.write(b"this is not HTTP at all\r\n\r\n")
            await writer.drain()
            return False
        if path == "/hang":
            await asyncio.sleep(3600)
            return False
        if path == "/junk_after":  # a complete answer, then bytes that belong to nothing
            self.send(writer, 200, b"junk follows")
            await writer.drain()
            await asyncio.sleep(0.005)
            writer.write(b"JUNK\r\n\r\n")
            await writer.drain()
            return True
        if path == "/reject":  # answers before reading the body, then closes
            self.send(writer, 413, b"too large for " + self.id.encode(), close=True)
            await writer.drain()
            return False

        if path == "/duplex":  # streams its answer while the body comes in; ends with the body
            await self.download(writer, int(query.get("bytes", "0")), True, close,
                                end_chunked=False)
            await self.read_body(request, reader, lambda data: None)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return not close

        digest = hashlib.sha256()
        length = 0

        def sink(data):
            nonlocal length
            digest.update(data)
            length += len(data)

        await self.read_body(request, reader, sink)

        if path == "/post_close":
            return False
        if path == "/partial":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            await writer.drain()
            return False
        if path.endswith("/echo"):
            body = json.dumps({"id": self.id, "method": request["method"],
                               "target": request["target"], "version": request["version"],
                               "headers": request["headers"], "body_length": length,
                               "body_sha256": digest.hexdigest()}).encode()
            self.send(writer, 200, body, [("Content-Type", "application/json")], close=close)
        elif path == "/upload":
            body = json.dumps({"id": self.id, "length": length,
                               "sha256": digest.hexdigest()}).encode()
            if query.get("chunked_response") == "1":
                await self.send_chunked(writer, [body[:10], body[10:]], close)
            else:
                self.send(writer, 200, body, [("Content-Type", "application/json")], close=close)
        elif path == "/download":
            await self.download(writer, int(query.get("bytes", "0")),
                                query.get("chunked") == "1", close,
                                head_only=request["method"] == "HEAD")
        elif path == "/slow":
            await asyncio.sleep(int(query.get("ms", "100")) / 1000)
            self.send(writer, 200, self.id.encode(), close=close)
        elif path == "/status":
            code = int(query.get("code", "200"))
            self.send(writer, code, f"status {code} from {self.id}".encode(),
                      [("Content-Type", "text/plain")], close=close)
        elif path == "/redirect":
            to = query.get("to", f"http://127.0.0.1:{self.port}/x")
            self.send(writer, 302, b"moved", [("Location", to),
                                              ("Refresh", f"0; url={to}")], close=close)
        elif path == "/hop":
            self.send(writer, 200, b"hop", [("Connection", "X-Hop"), ("X-Hop", "secret"),
                                            ("Keep-Alive", "timeout=5"), ("X-End", "kept"),
                                            ("Proxy-Authenticate", "Basic")], close=close)
        elif path == "/health":
            if self.healthy:
                self.send(writer, 200, b"ok", close=close)
            else:
                self.send(writer, 503, b"unhealthy", close=close)
        else:
            if self.slow_ms:
                await asyncio.sleep(self.slow_ms / 1000)
            self.send(writer, 200, self.id.encode(), [("Content-Type", "text/plain")],
                      close=close)
        await writer.drain()
        return not close

    async def send_chunked(self, writer, pieces, close):
        # One write: the whole (small) answer arrives at once.
        head = ["HTTP/1.1 200 OK", f"X-Backend: {self.id}", "Transfer-Encoding: chunked"]
        if close:
            head.append("Connection: close")
        out = ("\r\n".join(head) + "\r\n\r\n").encode()
        for piece in pieces:
            if piece:
                out += b"%x\r\n%s\r\n" % (len(piece), piece)
        writer.write(out + b"0\r\n\r\n")

    async def download(self, writer, size, chunked, close, head_only=False, end_chunked=True):
        head = ["HTTP/1.1 200 OK", f"X-Backend: {self.id}", "Content-Type: application/octet-stream"]
        head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
        if close:
            head.append("Connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        if head_only:
            return
        left = size
        while left:
            piece = PATTERN[:min(left, len(PATTERN))]
            if chunked:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                writer.write(piece)
            left -= len(piece)
            await writer.drain()
        if chunked and end_chunked:
            writer.write(b"0\r\n\r\n")

    async def websocket(self, request, reader, writer):
        key = self.header(request, "sec-websocket-key") or ""
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
                      f"X-Backend: {self.id}\r\n\r\n").encode())
        await writer.drain()
        while True:
            try:
                b0, b1 = await reader.readexactly(2)
            except asyncio.IncompleteReadError:
                return
            opcode = b0 & 0x0F
            length = b1 & 0x7F
            if length == 126:
                length = int.from_bytes(await reader.readexactly(2), "big")
            elif length == 127:
                length = int.from_bytes(await reader.readexactly(8), "big")
            mask = await reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
            payload = bytearray(await reader.readexactly(length))
            for i in range(len(payload)):
                payload[i] ^= mask[i % 4]
            if opcode == 0x8:  # close: answer it and stop
                writer.write(self.frame(0x8, bytes(payload[:2])))
                await writer.drain()
                return
            if opcode == 0x9:  # ping
                writer.write(self.frame(0xA, bytes(payload)))
            elif opcode in (0x1, 0x2):
                writer.write(self.frame(opcode, bytes(payload)))
            await writer.drain()

    @staticmethod
    def frame(opcode, payload):
        n = len(payload)
        if n < 126:
            head = bytes([0x80 | opcode, n])
        elif n < 65536:
            head = bytes([0x80 | opcode, 126]) + n.to_bytes(2, "big")
        else:
            head = bytes([0x80 | opcode, 127]) + n.to_bytes(8, "big")
        return head + payload


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--id", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--slow-ms", type=int, default=0,
                        help="delay of the default answer (least-connections tests)")
    parser.add_argument("--close-after", type=int, default=0,
                        help="close each connection silently after this many answers")
    parser.add_argument("--unix", help="listen on this unix socket path instead of TCP")
    parser.add_argument("--tls-cert", help="speak TLS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    args = parser.parse_args()
    tls = None
    if args.tls_cert:
        import ssl
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    backend = Backend(args.id, args.slow_ms, args.close_after)
    if args.unix:
        server = await asyncio.start_unix_server(backend.handle, args.unix, backlog=4096,
                                                 limit=1 << 20)
        print(f"listening on unix:{args.unix}", flush=True)
    else:
        server = await asyncio.start_server(backend.handle, "127.0.0.1", args.port, backlog=4096,
                                            reuse_address=True, limit=1 << 20, ssl=tls)
        backend.port = server.sockets[0].getsockname()[1]
        print(f"listening on 127.0.0.1:{backend.port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
