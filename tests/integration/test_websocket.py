"""WebSocket endpoints of libperegrine (peregrine/websocket.h) on real connections: the
examples/websocket_echo and examples/websocket_chat programs driven by python3-websockets (the
opening handshake, messages, fragments, pings, the close) and by raw sockets for what a correct
client never sends (unmasked frames, invalid UTF-8) or never does (stop reading)."""

import asyncio
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import time
import zlib

import websockets

from harness import PEREGRINE_BIN, ServerTestCase, h2c, main, make_config, proc_status_kb

BUILD = os.path.dirname(PEREGRINE_BIN)
ECHO_BIN = os.path.join(BUILD, "websocket_echo")
CHAT_BIN = os.path.join(BUILD, "websocket_chat")

KEY = base64.b64encode(b"0123456789abcdef").decode()
UPGRADE = ("GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: " + KEY + "\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n")
RSV1 = 0x40
DEFLATE_OFFER = "permessage-deflate; client_max_window_bits"


def deflate(message):
    """A message compressed as RFC 7692 7.2.1 says (raw deflate, sync flush, tail removed)."""
    c = zlib.compressobj(wbits=-15)
    out = c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def inflate(payload):
    return zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff")


def frame(opcode, payload, fin=True, mask=b"\x11\x22\x33\x44", rsv=0):
    """One client frame (masked unless mask is None)."""
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    bit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask is None:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class RawWebSocket:
    """A WebSocket client on a plain socket: the handshake, then frames by hand."""

    def __init__(self, port, path="/ws", rcvbuf=None, extensions=None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(5)
        self.sock.connect(("127.0.0.1", port))
        extra = f"Sec-WebSocket-Extensions: {extensions}\r\n" if extensions else ""
        self.sock.sendall(UPGRADE.format(path=path, extra=extra).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise AssertionError("closed during the handshake")
            self.buf += data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        self.headers = {k.strip().lower(): v.strip() for k, v in
                        (line.split(":", 1) for line in head.decode().split("\r\n")[1:])}
        self.rsv = 0  # the RSV bits of the last frame read

    def _need(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data

    def read_frame(self):
        """(opcode, payload) of the next server frame (its RSV bits in self.rsv)."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        self.rsv = b0 & 0x70
        assert not b1 & 0x80, "a server frame must not be masked"
        n, off = b1 & 0x7F, 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(off + n)
        payload = self.buf[off:off + n]
        self.buf = self.buf[off + n:]
        return b0 & 0x0F, payload

    def read_close(self):
        """The close code the server sends (skipping data frames and pings before it)."""
        while True:
            opcode, payload = self.read_frame()
            if opcode == 8:
                return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005

    def assert_closed(self, test):
        """The server closes the TCP connection (EOF or a reset) without waiting for us."""
        self.sock.settimeout(3)
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        except socket.timeout:
            test.fail("the server did not close the TCP connection")

    def close(self):
        self.sock.close()


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


class EchoTest(ServerTestCase):
    def start_echo(self, *extra, workers=1):
        self.assertTrue(os.path.exists(ECHO_BIN), f"{ECHO_BIN} does not exist")
        self.srv = self.start_argv([ECHO_BIN, "--listen", "127.0.0.1:0", "--workers", str(workers),
                                    *extra], name="websocket_echo")
        self.url = f"ws://127.0.0.1:{self.srv.port}/ws"
        return self.srv

    def stats(self):
        return json.loads(self.get(self.srv.port, "/stats")[2])

    def logged(self, text):
        self.wait_for(lambda: text in self.srv.stderr(), msg=f"'{text}' in the error log")

    def test_text_binary_fragments_and_subprotocol(self):
        self.start_echo()

        async def scenario():
            async with websockets.connect(self.url, subprotocols=["other", "echo"]) as ws:
                self.assertEqual(ws.subprotocol, "echo")
                await ws.send("héllo")
                self.assertEqual(await ws.recv(), "héllo")
                await ws.send(b"\x00\xff" * 1000)
                self.assertEqual(await ws.recv(), b"\x00\xff" * 1000)
                await ws.send("")
                self.assertEqual(await ws.recv(), "")
                await ws.send(["frag", "men", "ted"])  # three frames, one message
                self.assertEqual(await ws.recv(), "fragmented")
                await ws.send([b"a" * 70000, b"b" * 70000])
                self.assertEqual(await ws.recv(), b"a" * 70000 + b"b" * 70000)
                pong = await ws.ping(b"are you there")
                await asyncio.wait_for(pong, 3)
                for i in range(100):  # many in flight at once
                    await ws.send(str(i))
                self.assertEqual([await ws.recv() for _ in range(100)], [str(i) for i in range(100)])
            self.assertEqual(ws.close_code, 1000)

        run(scenario())
        self.wait_for(lambda: self.stats() == {"open": 0, "closed": 1, "last_close": 1000},
                      msg="on_close with 1000")

    def test_no_subprotocol_in_common(self):
        self.start_echo()

        async def scenario():
            async with websockets.connect(self.url) as ws:
                self.assertIsNone(ws.subprotocol)
                await ws.send("x")
                self.assertEqual(await ws.recv(), "x")

        run(scenario())

    def test_client_close_code_and_reason(self):
        self.start_echo()

        async def scenario():
            ws = await websockets.connect(self.url)
            await ws.close(4000, "bye")
            self.assertEqual(ws.close_code, 4000)  # the server answers with the same code

        run(scenario())
        self.wait_for(lambda: self.stats()["last_close"] == 4000, msg="on_close with 4000")

    def test_message_too_big_1009(self):
        self.start_echo("--max-message-bytes", "1000")

        async def scenario():
            async with websockets.connect(self.url, max_size=None) as ws:
                await ws.send("x" * 1000)  # at the limit: fine
                self.assertEqual(len(await ws.recv()), 1000)
                await ws.send("x" * 1001)
                with self.assertRaises(websockets.ConnectionClosed) as caught:
                    await ws.recv()
                self.assertEqual(caught.exception.rcvd.code, 1009)

        run(scenario())
        self.wait_for(lambda: self.stats()["last_close"] == 1009, msg="on_close with 1009")
        self.logged("closing with 1009")

    def test_invalid_utf8_1007(self):
        self.start_echo()
        c = RawWebSocket(self.srv.port)
        self.assertEqual(c.status, 101)
        c.sock.sendall(frame(1, b"ok\xff"))
        self.assertEqual(c.read_close(), 1007)
        c.assert_closed(self)
        c.close()
        self.wait_for(lambda: self.stats()["last_close"] == 1007, msg="on_close with 1007")

    def test_unmasked_frame_1002(self):
        self.start_echo()
        c = RawWebSocket(self.srv.port)
        c.sock.sendall(frame(1, b"hello", mask=None))
        self.assertEqual(c.read_close(), 1002)
        c.assert_closed(self)
        c.close()
        self.wait_for(lambda: self.stats()["last_close"] == 1002, msg="on_close with 1002")
        self.logged("closing with 1002")

    def test_raw_fragments_with_ping_between(self):
        self.start_echo()
        c = RawWebSocket(self.srv.port)
        c.sock.sendall(frame(2, b"ab", fin=False) + frame(9, b"p") + frame(0, b"cd"))
        self.assertEqual(c.read_frame(), (10, b"p"))  # the pong comes first
        self.assertEqual(c.read_frame(), (2, b"abcd"))
        c.sock.sendall(frame(8, struct.pack("!H", 1000)))
        self.assertEqual(c.read_close(), 1000)
        c.assert_closed(self)
        c.close()

    def test_client_disconnect_runs_on_close(self):
        self.start_echo()
        c = RawWebSocket(self.srv.port)
        self.wait_for(lambda: self.stats()["open"] == 1, msg="on_open")
        c.close()  # no close frame
        self.wait_for(lambda: self.stats() == {"open": 0, "closed": 1, "last_close": 1006},
                      msg="on_close once, with 1006")
        time.sleep(0.3)
        self.assertEqual(self.stats()["closed"], 1)

    def test_server_pings_a_silent_client_then_closes(self):
        self.start_echo("--ping-interval-ms", "300")
        c = RawWebSocket(self.srv.port)
        started = time.monotonic()
        self.assertEqual(c.read_frame()[0], 9)  # a ping after ~300 ms of silence
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        self.assertEqual(c.read_close(), 1001)  # not answered: closed
        c.assert_closed(self)
        c.close()

        async def scenario():  # a client that answers pings stays
            async with websockets.connect(self.url) as ws:
                await asyncio.sleep(1.2)
                await ws.send("still here")
                self.assertEqual(await ws.recv(), "still here")

        run(scenario())

    def test_slow_reader_is_dropped_and_memory_stays_bounded(self):
        self.start_echo("--max-queued-bytes", "1000000")
        rss_before = self.rss_kb()
        c = RawWebSocket(self.srv.port, rcvbuf=4096)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        message = frame(2, b"z" * 65536)
        sent = 0
        try:
            for _ in range(800):  # 50 MiB echoed to a client that reads nothing
                c.sock.sendall(message)
                sent += 1
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        self.wait_for(lambda: self.stats()["last_close"] == 1008, timeout=10,
                      msg="the slow client dropped with 1008")
        self.assertLess(sent, 800, "the server went on accepting messages from a client it drops")
        grown_mb = (self.rss_kb() - rss_before) / 1024
        self.assertLess(grown_mb, 24, f"the server grew {grown_mb:.1f} MB")
        self.logged("client too slow")
        c.close()

        async def scenario():  # others are served on
            async with websockets.connect(self.url) as ws:
                await ws.send("next")
                self.assertEqual(await ws.recv(), "next")

        run(scenario())

    def rss_kb(self):
        return proc_status_kb(self.srv.pid, "VmHWM")

    def test_not_an_upgrade(self):
        self.start_echo()
        status, headers, _ = self.get(self.srv.port, "/ws")
        self.assertEqual(status, 426)
        self.assertEqual(headers["Upgrade"], "websocket")
        self.assertEqual(headers["Sec-WebSocket-Version"], "13")
        upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": KEY,
                   "Sec-WebSocket-Version": "13"}
        self.assertEqual(self.http(self.srv.port, "POST", "/ws", headers=upgrade, body=b"")[0], 400)
        self.assertEqual(self.get(self.srv.port, "/ws",
                                  headers=dict(upgrade, **{"Sec-WebSocket-Key": "short"}))[0], 400)
        self.assertEqual(self.get(self.srv.port, "/ws",
                                  headers=dict(upgrade, **{"Sec-WebSocket-Version": "8"}))[0], 426)
        self.logged("websocket /ws: 400")

    def test_graceful_stop_closes_with_1001(self):
        self.start_echo(workers=2)

        async def scenario():
            clients = [await websockets.connect(self.url) for _ in range(4)]
            for ws in clients:
                await ws.send("x")
                self.assertEqual(await ws.recv(), "x")
            self.srv.signal(signal.SIGQUIT)  # graceful (SIGTERM: at once)
            for ws in clients:
                with self.assertRaises(websockets.ConnectionClosed) as caught:
                    await ws.recv()
                self.assertEqual(caught.exception.rcvd.code, 1001)

        run(scenario())
        self.assertEqual(self.srv.wait(10), 0)


class DeflateTest(ServerTestCase):
    """permessage-deflate (RFC 7692) through examples/websocket_echo: python3-websockets offers it
    by default (compression=None does not); raw sockets look at the frames on the wire."""

    start_echo = EchoTest.start_echo
    stats = EchoTest.stats
    logged = EchoTest.logged

    def test_negotiated_by_default_and_round_trips(self):
        self.start_echo()
        text = "".join(f"line {i}: the quick brown fox\n" for i in range(8000))  # ~230 KB
        data = bytes(range(256)) * 1000 + b"\x00" * 100000

        async def scenario():
            async with websockets.connect(self.url, max_size=None) as ws:
                self.assertEqual(ws.response_headers.get("Sec-WebSocket-Extensions"),
                                 "permessage-deflate; server_no_context_takeover; "
                                 "client_no_context_takeover")
                for message in (text, data, "short", b"", "", text[:1023], text[:1024]):
                    await ws.send(message)
                    self.assertEqual(await ws.recv(), message)
                await ws.send([text[:5000], text[5000:]])  # fragmented, compressed as one message
                self.assertEqual(await ws.recv(), text)
            async with websockets.connect(self.url, compression=None, max_size=None) as ws:
                self.assertNotIn("Sec-WebSocket-Extensions", ws.response_headers)
                await ws.send(text)
                self.assertEqual(await ws.recv(), text)

        run(scenario())
        self.wait_for(lambda: self.stats()["closed"] == 2 and self.stats()["last_close"] == 1000,
                      msg="two clean closes")

    def test_the_wire_is_compressed(self):
        self.start_echo()
        c = RawWebSocket(self.srv.port, extensions="x-unknown, " + DEFLATE_OFFER)
        self.assertEqual(c.status, 101)
        self.assertEqual(c.headers["sec-websocket-extensions"],
                         "permessage-deflate; server_no_context_takeover; "
                         "client_no_context_takeover")
        text = b"compress me, compress me again. " * 4000  # 128 KB
        c.sock.sendall(frame(1, deflate(text), rsv=RSV1))
        opcode, payload = c.read_frame()
        self.assertEqual((opcode, c.rsv), (1, RSV1))
        self.assertLess(len(payload), len(text) // 50, "the echo went uncompressed")
        self.assertEqual(inflate(payload), text)
        c.sock.sendall(frame(2, b"\x01\x02" * 3000))  # a client may send uncompressed too
        opcode, payload = c.read_frame()
        self.assertEqual((opcode, c.rsv), (2, RSV1))
        self.assertEqual(inflate(payload), b"\x01\x02" * 3000)
        c.sock.sendall(frame(1, deflate(b"tiny"), rsv=RSV1))  # under min_compress_bytes: plain
        self.assertEqual(c.read_frame(), (1, b"tiny"))
        self.assertEqual(c.rsv, 0)
        random_bytes = os.urandom(4096)  # does not get smaller: sent as it is
        c.sock.sendall(frame(2, random_bytes))
        self.assertEqual(c.read_frame(), (2, random_bytes))
        self.assertEqual(c.rsv, 0)
        c.sock.sendall(frame(9, b"p", rsv=RSV1))  # RSV1 on a control frame
        self.assertEqual(c.read_close(), 1002)
        c.assert_closed(self)
        c.close()

    def test_bomb_closes_1009_with_memory_bounded(self):
        self.start_echo("--max-message-bytes", "100000")
        start_kb = EchoTest.rss_kb(self)  # growth, not the value: ASan builds start near 42 MB
        bomb = deflate(b"\x00" * 50_000_000)  # 50 MB in ~49 KB
        self.assertLess(len(bomb), 100000)
        c = RawWebSocket(self.srv.port, extensions=DEFLATE_OFFER)
        self.assertIn("permessage-deflate", c.headers["sec-websocket-extensions"])
        try:
            c.sock.sendall(frame(2, bomb, rsv=RSV1))
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we still sent: what we want to see below
        self.assertEqual(c.read_close(), 1009)
        c.assert_closed(self)
        c.close()
        self.wait_for(lambda: self.stats()["last_close"] == 1009, msg="on_close with 1009")
        self.logged("closing with 1009")
        self.assertLess((EchoTest.rss_kb(self) - start_kb) / 1024, 24, "the bomb was inflated")

        async def scenario():  # python3-websockets compresses the same way: 1009 too
            async with websockets.connect(self.url) as ws:
                await ws.send("a" * 1_000_000)
                with self.assertRaises(websockets.ConnectionClosed) as caught:
                    await ws.recv()
                self.assertEqual(caught.exception.rcvd.code, 1009)

        run(scenario())

    def test_corrupt_compressed_data_1007(self):
        self.start_echo()
        c = RawWebSocket(self.srv.port, extensions=DEFLATE_OFFER)
        c.sock.sendall(frame(1, b"\xff\xff\xff\xff\xff", rsv=RSV1))
        self.assertEqual(c.read_close(), 1007)
        c.assert_closed(self)
        c.close()

    def test_off(self):
        self.start_echo("--deflate", "off")

        async def scenario():
            async with websockets.connect(self.url) as ws:  # offers it: not answered
                self.assertNotIn("Sec-WebSocket-Extensions", ws.response_headers)
                await ws.send("x" * 5000)
                self.assertEqual(await ws.recv(), "x" * 5000)

        run(scenario())
        c = RawWebSocket(self.srv.port, extensions=DEFLATE_OFFER)
        self.assertNotIn("sec-websocket-extensions", c.headers)
        c.sock.sendall(frame(1, deflate(b"hello"), rsv=RSV1))  # RSV1 unnegotiated
        self.assertEqual(c.read_close(), 1002)
        c.assert_closed(self)
        c.close()

    def test_context_takeover(self):
        self.start_echo("--deflate", "takeover")
        messages = [f'{{"seq": {i}, "text": "{"the same words again " * 60}"}}' for i in range(20)]

        async def scenario():
            async with websockets.connect(self.url) as ws:
                self.assertEqual(ws.response_headers.get("Sec-WebSocket-Extensions"),
                                 "permessage-deflate")
                for m in messages:
                    await ws.send(m)
                    self.assertEqual(await ws.recv(), m)

        run(scenario())
        # Raw: the second echo refers back to the first one's window (much smaller).
        c = RawWebSocket(self.srv.port, extensions=DEFLATE_OFFER)
        self.assertEqual(c.headers["sec-websocket-extensions"], "permessage-deflate")
        d = zlib.decompressobj(wbits=-15)
        sizes = []
        for m in (os.urandom(3000), os.urandom(1000)):
            data = m * 2
            c.sock.sendall(frame(2, data))
            opcode, payload = c.read_frame()
            self.assertEqual(c.rsv, RSV1)
            self.assertEqual(d.decompress(payload + b"\x00\x00\xff\xff"), data)
            sizes.append(len(payload))
        c.sock.sendall(frame(2, m * 2))
        opcode, payload = c.read_frame()
        self.assertEqual(d.decompress(payload + b"\x00\x00\xff\xff"), m * 2)
        self.assertLess(len(payload), 100, "the window was not kept")
        c.close()


class ConfigFileTest(ServerTestCase):
    """register_websocket: a TOML route naming the endpoint; HTTP/2 and reload."""

    ROUTES = ('[[site.route]]\nprefix = "/ws"\nhandler = "echo"\n'
              '[[site.route]]\nprefix = "/stats"\nhandler = "stats"\n')

    def start_app(self, http2=False):
        text = make_config(self.make_root(), workers=2, routes=self.ROUTES)
        self.path = self.write_config(h2c(text) if http2 else text)
        self.srv = self.start_argv([ECHO_BIN, "--config", self.path], name="websocket_echo")
        return self.srv

    def test_http2_request_gets_an_error_status(self):
        srv = self.start_app(http2=True)
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w",
                              "%{http_version} %{http_code}", f"http://127.0.0.1:{srv.port}/ws"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.stdout, "2 426", out.stderr)

        async def scenario():  # HTTP/1.1 upgrades on the same listener work
            async with websockets.connect(f"ws://127.0.0.1:{srv.port}/ws") as ws:
                await ws.send("h1")
                self.assertEqual(await ws.recv(), "h1")

        run(scenario())

    def test_reload_closes_with_1001(self):
        srv = self.start_app()

        async def scenario():
            ws = await websockets.connect(f"ws://127.0.0.1:{srv.port}/ws")
            await ws.send("before")
            self.assertEqual(await ws.recv(), "before")
            srv.signal(signal.SIGHUP)
            with self.assertRaises(websockets.ConnectionClosed) as caught:
                await ws.recv()
            self.assertEqual(caught.exception.rcvd.code, 1001)
            async with websockets.connect(f"ws://127.0.0.1:{srv.port}/ws") as ws:
                await ws.send("after")
                self.assertEqual(await ws.recv(), "after")

        run(scenario())


class ChatTest(ServerTestCase):
    def test_broadcast_across_two_workers(self):
        self.assertTrue(os.path.exists(CHAT_BIN), f"{CHAT_BIN} does not exist")
        srv = self.start_argv([CHAT_BIN, "--listen", "127.0.0.1:0", "--workers", "2"],
                              name="websocket_chat")
        url = f"ws://127.0.0.1:{srv.port}/chat"

        async def scenario():
            clients, workers = [], set()
            while len(workers) < 2 or len(clients) < 4:  # the kernel spreads them (SO_REUSEPORT)
                self.assertLess(len(clients), 40, "every connection went to one worker")
                ws = await websockets.connect(url)
                welcome = json.loads(await ws.recv())
                workers.add(welcome["worker"])
                clients.append((ws, welcome["welcome"]))
            await asyncio.sleep(0.3)  # the joins are broadcast too: let them arrive
            speaker, name = clients[0]
            await speaker.send("hello all")
            for ws, _ in clients:
                while True:
                    line = await asyncio.wait_for(ws.recv(), 5)
                    if line == f"{name}: hello all":
                        break
            leaving, left_name = clients[-1]
            await leaving.close()
            while (await asyncio.wait_for(speaker.recv(), 5)) != f"{left_name} left":
                pass
            quitter, quitter_name = clients[-2]
            await quitter.send("/quit")  # the server's close(), answered by the client
            with self.assertRaises(websockets.ConnectionClosedOK) as caught:
                while True:
                    await quitter.recv()
            self.assertEqual((caught.exception.rcvd.code, caught.exception.rcvd.reason), (1000, "bye"))
            while (await asyncio.wait_for(speaker.recv(), 5)) != f"{quitter_name} left":
                pass
            for ws, _ in clients[:-2]:
                await ws.close()

        run(scenario())
        status, headers, body = self.get(srv.port, "/")
        self.assertEqual(status, 200)
        self.assertIn(b"new WebSocket", body)

    def broadcast_to_deflate_and_plain_clients(self, mode, offered):
        """Clients with and without permessage-deflate on both workers all get the same text;
        raw clients check the frames: compressed exactly for those that negotiated it."""
        srv = self.start_argv([CHAT_BIN, "--listen", "127.0.0.1:0", "--workers", "2",
                               "--deflate", mode], name="websocket_chat")
        url = f"ws://127.0.0.1:{srv.port}/chat"
        text = "news of the day, " * 400  # ~6.8 KB, compressible

        def raw_client(extensions):
            c = RawWebSocket(srv.port, path="/chat", extensions=extensions)
            self.assertEqual(c.status, 101)
            self.assertEqual("sec-websocket-extensions" in c.headers, bool(extensions))
            return c

        async def scenario():
            clients, kinds = [], set()
            while len(kinds) < 4 or len(clients) < 6:  # (worker, compressed) of each kind
                self.assertLess(len(clients), 60, "every connection went to one worker")
                compressed = len(clients) % 2 == 0
                ws = await websockets.connect(url, **({} if compressed else {"compression": None}))
                self.assertEqual("Sec-WebSocket-Extensions" in ws.response_headers, compressed)
                self.assertEqual(ws.response_headers.get("Sec-WebSocket-Extensions"), offered
                                 if compressed else None)
                welcome = json.loads(await ws.recv())
                kinds.add((welcome["worker"], compressed))
                clients.append((ws, welcome["welcome"]))
            raw_plain, raw_deflate = raw_client(None), raw_client(DEFLATE_OFFER)
            await asyncio.sleep(0.3)  # the joins are broadcast too: let them arrive
            speaker, name = clients[0]
            await speaker.send(text)
            for ws, _ in clients:
                while (await asyncio.wait_for(ws.recv(), 5)) != f"{name}: {text}":
                    pass
            expected = f"{name}: {text}".encode()
            for c, rsv in ((raw_plain, 0), (raw_deflate, RSV1)):
                while True:  # the welcome and the joins come first
                    opcode, payload = c.read_frame()
                    message = inflate(payload) if c.rsv else payload
                    if message == expected:
                        break
                self.assertEqual((opcode, c.rsv), (1, rsv))
                if rsv:
                    self.assertLess(len(payload), len(expected) // 10)
                c.close()
            for ws, _ in clients:
                await ws.close()

        run(scenario())

    def test_broadcast_shared_compressed_frame(self):
        self.broadcast_to_deflate_and_plain_clients(
            "on", "permessage-deflate; server_no_context_takeover; client_no_context_takeover")

    def test_broadcast_with_context_takeover(self):
        self.broadcast_to_deflate_and_plain_clients("takeover", "permessage-deflate")


if __name__ == "__main__":
    main()
