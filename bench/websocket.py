#!/usr/bin/python3
"""WebSocket benchmark of issue 20: the server's CPU per message, Peregrine against a
python3-websockets server, with nginx's WebSocket proxy in front of the python server for context.

    /usr/bin/python3 bench/websocket.py                                  # every row, 10 s echo
    /usr/bin/python3 bench/websocket.py --servers python,nginx --duration 5
    /usr/bin/python3 bench/websocket.py --scenarios broadcast --clients 10000 --publishes 200

Scenarios (bench/README.md, "WebSocket"):
  echo       --connections (1,000) connections, each keeping --in-flight (1) text messages of
             --size (64) bytes in flight for --duration seconds (or --messages in all); every
             echoed message is checked, content and order, and every one sent must come back.
  broadcast  --clients (10,000) idle connections and one publisher; the publisher sends
             --publishes (100) messages, one at a time, and each must reach every client before
             the next is sent. Delivered messages are counted and checked.
Rows: peregrine (examples/websocket_echo, one worker: its / echoes, its /broadcast broadcasts), python (the
python3-websockets server of bench/ws_python_server.py) and, for echo, nginx proxying to that
python server (nginx's own CPU per message is its proxy overhead).

Method, as bench/run.py's: the server under test pinned to CPU 0; this script, the load client,
pinned to CPU 1 (and, in the nginx row, the python back end too, as run.py's back ends are).
Server CPU is the schedstat time (ns) of every thread of every process of the server, the
utime+stime ticks of /proc/PID/stat alongside, between the start and the end of the measured
load; RSS growth is the server's VmRSS after every connection is open (and idle for 1 s) minus
before the first one. The client is raw non-blocking sockets on one epoll, with its frames masked
in advance; its own CPU use is printed, and when it nears 100 % while the server's does not, the
client is what limits messages/s (not the CPU per message, which is the figure that matters).

python3 stdlib only, /usr/bin/python3 for the python server's websockets module. Only 127.0.0.0/8
is ever targeted.
"""

import argparse
import base64
import hashlib
import json
import math
import os
import random
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)

from peregrine_bench import procs  # noqa: E402
from peregrine_bench.measure import cpu_sample, process_tree, rss_kb  # noqa: E402
from peregrine_bench.servers import nginx_conf  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
CLK_TCK = os.sysconf("SC_CLK_TCK")
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h; not in Python's socket module
CONNECT_BATCH = 100  # handshakes in progress at a time: within every server's listen backlog
STALL_SECONDS = 10.0  # no message for this long while some are due: the server is stuck


# One receive buffer for every connection: recv() of a fresh 256 KB bytes object per call costs an
# mmap and page faults, more than the message it brings.
RECV_BUF = bytearray(262144)
RECV_VIEW = memoryview(RECV_BUF)


class VerifyError(Exception):
    """A wrong, missing or unexpected answer: the row fails instead of reporting a figure."""


# --- frames ----------------------------------------------------------------------------------

def frame_header(opcode, length, masked):
    b1 = 0x80 if masked else 0
    if length < 126:
        return bytes((0x80 | opcode, b1 | length))
    if length < 65536:
        return bytes((0x80 | opcode, b1 | 126)) + length.to_bytes(2, "big")
    return bytes((0x80 | opcode, b1 | 127)) + length.to_bytes(8, "big")


def server_frame(payload, opcode=1):
    """What a server sends for `payload`: one unfragmented, unmasked frame."""
    return frame_header(opcode, len(payload), False) + payload


def client_frame(payload, opcode=1, rng=random):
    """A client's frame: masked (RFC 6455 5.3) with a fresh random key."""
    key = rng.randbytes(4)
    n = len(payload)
    mask = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    masked = (int.from_bytes(payload, "big") ^ mask).to_bytes(n, "big") if n else b""
    return frame_header(opcode, n, True) + key + masked


def payload_for(tag, seq, size):
    """A message of `size` printable bytes that names its sender `tag` and its number `seq`:
    an answer that went to the wrong connection or came out of order does not compare equal."""
    head = f"{tag} #{seq} ".encode()
    filler = bytes(33 + (seq * 7 + i * 13 + len(tag) * 3) % 94 for i in range(size))
    return (head + filler)[:size]


class FrameError(Exception):
    pass


def parse_frame(buf, off):
    """One server frame at buf[off:]: (fin, opcode, payload, next offset), or None if it is not
    all there yet. A masked frame or an RSV bit from a server is a protocol error."""
    if len(buf) - off < 2:
        return None
    b0, b1 = buf[off], buf[off + 1]
    if b0 & 0x70:
        raise FrameError(f"RSV bits set in a server frame (byte 0x{b0:02x})")
    if b1 & 0x80:
        raise FrameError("masked frame from the server")
    n = b1 & 0x7F
    pos = off + 2
    if n == 126:
        if len(buf) - pos < 2:
            return None
        n = int.from_bytes(buf[pos:pos + 2], "big")
        pos += 2
    elif n == 127:
        if len(buf) - pos < 8:
            return None
        n = int.from_bytes(buf[pos:pos + 8], "big")
        pos += 8
    if len(buf) - pos < n:
        return None
    return bool(b0 & 0x80), b0 & 0x0F, bytes(buf[pos:pos + n]), pos + n


# --- one client connection ---------------------------------------------------------------------

class Conn:
    """A connected, upgraded socket. feed() checks what the server sent against what it must
    send: message k (counted from 0 on this connection) must be expected_payload(k) in a text
    message. The usual form of that answer, one unfragmented frame, is compared as bytes
    (expected_frame(k)); anything else (fragments, pings, a close) goes through parse_frame."""

    __slots__ = ("sock", "fd", "name", "buf", "received", "frags", "frag_op", "out", "sent",
                 "expected_frame", "expected_payload", "want_write", "ep", "cycle")

    def __init__(self, sock, name, leftover):
        self.sock = sock
        self.fd = sock.fileno()
        self.name = name
        self.buf = bytearray(leftover)
        self.received = 0
        self.sent = 0
        self.frags = None
        self.frag_op = 0
        self.out = b""
        self.want_write = False
        self.ep = None
        self.expected_frame = None
        self.expected_payload = None
        self.cycle = None  # echo: (its frames masked in advance, twice over; frame size; count)

    def send(self, data):
        if self.out:
            self.out += data
            return
        try:
            n = self.sock.send(data)
        except BlockingIOError:
            n = 0
        except OSError as e:
            raise VerifyError(f"{self.name}: send failed: {e}")
        if n < len(data):
            self.out = data[n:]
            self._watch_write(True)

    def flush(self):
        if not self.out:
            return
        try:
            n = self.sock.send(self.out)
        except BlockingIOError:
            return
        except OSError as e:
            raise VerifyError(f"{self.name}: send failed: {e}")
        self.out = self.out[n:]
        if not self.out:
            self._watch_write(False)

    def _watch_write(self, on):
        if on != self.want_write:
            self.want_write = on
            self.ep.modify(self.fd, select.EPOLLIN | (select.EPOLLOUT if on else 0))

    def handle(self, events):
        """What epoll reported: sends what waits, reads what came; the messages it completed."""
        if events & select.EPOLLOUT:
            self.flush()
        if events & (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP):
            return self.read()
        return 0

    def read(self):
        """Reads what is there; the number of whole, correct messages it completed."""
        try:
            n = self.sock.recv_into(RECV_BUF)
        except BlockingIOError:
            return 0
        except OSError as e:
            raise VerifyError(f"{self.name}: connection failed after {self.received} messages: {e}")
        if not n:
            raise VerifyError(f"{self.name}: the server closed the connection after "
                              f"{self.received} messages")
        return self.feed(RECV_VIEW[:n])

    def feed(self, data):
        buf = self.buf
        buf += data
        off = 0
        start = self.received
        k = start
        frame_of = self.expected_frame
        while off < len(buf):
            if self.frags is None:
                exp = frame_of(k)
                end = off + len(exp)
                if buf[off:end] == exp:
                    off = end
                    k += 1
                    continue
            try:
                parsed = parse_frame(buf, off)
            except FrameError as e:
                raise VerifyError(f"{self.name}: {e} at message {k}")
            if parsed is None:
                break
            fin, opcode, payload, off = parsed
            self.received = k
            if self._control(opcode, payload):
                continue
            if opcode == 0:
                if self.frags is None:
                    raise VerifyError(f"{self.name}: continuation frame with no message begun")
                self.frags.append(payload)
            elif self.frags is not None:
                raise VerifyError(f"{self.name}: new message (opcode {opcode}) inside a "
                                  f"fragmented one")
            else:
                self.frag_op = opcode
                self.frags = [payload]
            if fin:
                message = b"".join(self.frags)
                opcode, self.frags = self.frag_op, None
                want = self.expected_payload(k)
                if opcode != 1 or message != want:
                    raise VerifyError(f"{self.name}: message {k} is wrong: opcode {opcode}, "
                                      f"{message[:80]!r} (expected a text message "
                                      f"{want[:80]!r})")
                k += 1
        del buf[:off]
        self.received = k
        return k - start

    def _control(self, opcode, payload):
        if opcode == 9:  # ping: a pong with the same payload, as RFC 6455 5.5.2 requires
            self.send(client_frame(payload, 10))
            return True
        if opcode == 10:
            return True
        if opcode == 8:
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
            raise VerifyError(f"{self.name}: the server sent a close (code {code}, "
                              f"{payload[2:80]!r}) after {self.received} messages")
        if opcode not in (0, 1, 2):
            raise VerifyError(f"{self.name}: reserved opcode {opcode} from the server")
        return False


# --- connecting ------------------------------------------------------------------------------

def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < need:
        raise SystemExit(f"{need} file descriptors are needed and RLIMIT_NOFILE's hard limit is "
                         f"{hard}: ulimit -Hn {need} (as root) or fewer connections")
    return soft


def connect_all(port, path, count, sources, name_prefix="c"):
    """`count` upgraded connections to 127.0.0.1:port, spread over `sources` source addresses
    (127.0.0.1, .2, ...: one address has ~28,000 ephemeral ports per destination). Each
    handshake's 101 and Sec-WebSocket-Accept are checked. Returns [Conn]."""
    ep = select.epoll()
    pending = {}  # fd -> [sock, key, response bytes, index]
    done = []
    next_i = 0
    deadline = time.monotonic() + 60 + count / 200

    def start(i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((f"127.0.0.{1 + i % sources}", 0))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        key = base64.b64encode(random.randbytes(16))
        pending[s.fileno()] = [s, key, b"", i, False]
        ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLIN)

    while next_i < count or pending:
        while next_i < count and len(pending) < CONNECT_BATCH:
            start(next_i)
            next_i += 1
        if time.monotonic() > deadline:
            raise VerifyError(f"connecting: {len(done)} of {count} connections upgraded in time")
        for fd, ev in ep.poll(1.0):
            entry = pending[fd]
            s, key, resp, i, sent = entry
            if not sent and ev & select.EPOLLOUT:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise VerifyError(f"connect to 127.0.0.1:{port} failed: {os.strerror(err)}")
                s.send(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:"
                       + str(port).encode() + b"\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key
                       + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
                entry[4] = True
                ep.modify(fd, select.EPOLLIN)
                continue
            if not ev & (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP):
                continue
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                raise VerifyError(f"handshake {i}: {e}")
            if not data:
                raise VerifyError(f"handshake {i}: the server closed the connection; it sent "
                                  f"{resp[:300]!r}")
            resp += data
            entry[2] = resp
            head_end = resp.find(b"\r\n\r\n")
            if head_end < 0:
                continue
            head = resp[:head_end].decode("latin-1")
            lines = head.split("\r\n")
            if not lines[0].startswith("HTTP/1.1 101"):
                raise VerifyError(f"handshake {i} to {path}: {lines[0]!r} instead of 101 "
                                  f"(--path names the WebSocket endpoint)")
            fields = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
                      for ln in lines[1:] if ":" in ln}
            accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
            if fields.get("sec-websocket-accept") != accept:
                raise VerifyError(f"handshake {i}: Sec-WebSocket-Accept "
                                  f"{fields.get('sec-websocket-accept')!r}, expected {accept!r}")
            if "sec-websocket-extensions" in fields:
                raise VerifyError(f"handshake {i}: an extension none was offered: "
                                  f"{fields['sec-websocket-extensions']!r}")
            ep.unregister(fd)
            del pending[fd]
            done.append(Conn(s, f"{name_prefix}{i}", resp[head_end + 4:]))
    ep.close()
    done.sort(key=lambda c: int(c.name[len(name_prefix):]))
    return done


def close_all(conns):
    for c in conns:
        try:
            c.sock.send(client_frame((1000).to_bytes(2, "big"), 8))
        except OSError:
            pass
        c.sock.close()


# --- the two loads ---------------------------------------------------------------------------

class EchoLoad:
    """Every connection sends its own numbered messages (frames masked in advance, a cycle of
    `period` different ones) and keeps `in_flight` of them unanswered."""

    def __init__(self, conns, size, in_flight):
        self.conns = conns
        self.in_flight = in_flight
        period = max(64, in_flight)
        rng = random.Random(20)
        for c in conns:
            payloads = [payload_for(c.name, k, size) for k in range(period)]
            frames = [server_frame(p) for p in payloads]
            out = [client_frame(p, 1, rng) for p in payloads]
            # Messages k..k+n-1 (n <= period) are one slice of the cycle written twice.
            c.expected_frame = lambda k, f=frames, p=period: f[k % p]
            c.expected_payload = lambda k, f=payloads, p=period: f[k % p]
            c.cycle = (b"".join(out) * 2, len(out[0]), period)

    def run(self, seconds=None, per_conn=None):
        """Sends for `seconds` (or `per_conn` messages on each connection), then waits for every
        answer. Returns (messages answered, wall seconds)."""
        ep = select.epoll()
        conns = {}
        quota = {}
        for c in self.conns:
            c.ep = ep
            conns[c.fd] = c
            ep.register(c.fd, select.EPOLLIN)
        base = {c.fd: c.received for c in self.conns}
        t0 = time.monotonic()
        end = t0 + seconds if seconds else None
        for c in self.conns:
            quota[c.fd] = c.sent + per_conn if per_conn else None
            self._top_up(c, quota[c.fd])
        sending = True
        outstanding = sum(c.sent - c.received for c in self.conns)
        last_progress = t0
        while outstanding:
            events = ep.poll(1.0)
            now = time.monotonic()
            if end and sending and now >= end:
                sending = False
            if not events and now - last_progress > STALL_SECONDS:
                late = [c.name for c in self.conns if c.sent > c.received][:5]
                raise VerifyError(f"{outstanding} messages unanswered for {STALL_SECONDS:.0f} s "
                                  f"(connections {', '.join(late)} ...)")
            for fd, ev in events:
                c = conns[fd]
                n = c.handle(ev)
                if n:
                    if c.received > c.sent:
                        raise VerifyError(f"{c.name}: more answers than messages sent")
                    outstanding -= n
                    last_progress = now
                    if sending:
                        outstanding += self._top_up(c, quota[fd])
        wall = time.monotonic() - t0
        for c in self.conns:
            ep.unregister(c.fd)
        ep.close()
        return sum(c.received - base[c.fd] for c in self.conns), wall

    def _top_up(self, c, quota):
        n = self.in_flight - (c.sent - c.received)
        if quota is not None:
            n = min(n, quota - c.sent)
        if n <= 0:
            return 0
        cycle, flen, period = c.cycle
        i = c.sent % period
        c.send(cycle[i * flen:(i + n) * flen])
        c.sent += n
        return n


class BroadcastLoad:
    """`receivers` idle connections and one publisher (the last connection). Message k is
    payload_for("bcast", k): every receiver must get every one, in order, and nothing else;
    the publisher may get its own messages back (a chat room's sender is in the room) or not."""

    def __init__(self, conns, size):
        self.publisher = conns[-1]
        self.receivers = conns[:-1]
        self.size = size
        self.frames = []
        self.payloads = []
        self.next_seq = 0
        self.rng = random.Random(21)
        for c in conns:
            c.expected_frame = self._frame
            c.expected_payload = self._payload

    def _grow(self, k):
        while len(self.payloads) <= k:
            p = payload_for("bcast", len(self.payloads), self.size)
            self.payloads.append(p)
            self.frames.append(server_frame(p))

    def _frame(self, k):
        if k >= len(self.frames):
            self._grow(k)
        return self.frames[k]

    def _payload(self, k):
        self._grow(k)
        return self.payloads[k]

    def run(self, publishes, timeout=60.0):
        """Publishes `publishes` messages, each once every receiver has the previous one.
        Returns (deliveries to receivers, wall seconds, [seconds from each publish until the
        last receiver had it])."""
        ep = select.epoll()
        conns = {}
        for c in self.receivers + [self.publisher]:
            c.ep = ep
            conns[c.fd] = c
            ep.register(c.fd, select.EPOLLIN)
        n = len(self.receivers)
        base = sum(c.received for c in self.receivers)
        latencies = []
        t0 = time.monotonic()
        for _ in range(publishes):
            seq = self.next_seq
            self.next_seq += 1
            target = n * self.next_seq
            have = sum(c.received for c in self.receivers)
            start = time.monotonic()
            self.publisher.send(client_frame(self._payload(seq), 1, self.rng))
            last_progress = start
            while have < target:
                events = ep.poll(1.0)
                now = time.monotonic()
                for fd, ev in events:
                    c = conns[fd]
                    got = c.handle(ev)
                    if c.received > self.next_seq:
                        raise VerifyError(f"{c.name}: {c.received} messages, only "
                                          f"{self.next_seq} published")
                    if got and c is not self.publisher:
                        have += got
                        last_progress = now
                if now - last_progress > min(timeout, STALL_SECONDS):
                    missing = [c.name for c in self.receivers if c.received < self.next_seq]
                    raise VerifyError(f"message {seq}: {len(missing)} of {n} clients never got it "
                                      f"({', '.join(missing[:5])} ...)")
            latencies.append(time.monotonic() - start)
        wall = time.monotonic() - t0
        for c in conns.values():
            ep.unregister(c.fd)
        ep.close()
        return sum(c.received for c in self.receivers) - base, wall, latencies


def drain_unsolicited(conns, seconds):
    """Reads for `seconds` whatever a server sends unasked after the upgrade (a chat's welcome):
    for a broadcast run with a server that greets, the greeting would not be message 0. Returns
    the bytes seen; the run refuses them (see run_broadcast)."""
    ep = select.epoll()
    by_fd = {c.fd: c for c in conns}
    for c in conns:
        ep.register(c.fd, select.EPOLLIN)
    seen = sum(len(c.buf) for c in conns)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for fd, _ in ep.poll(max(0.0, end - time.monotonic())):
            try:
                data = by_fd[fd].sock.recv(65536)
            except BlockingIOError:
                continue
            by_fd[fd].buf += data
            seen += len(data) or 1
    ep.close()
    return seen


# --- servers ---------------------------------------------------------------------------------

class Proc:
    """A server process in its own process group, pinned to `cpu`, its stderr in a log file;
    .port once its log says it listens (a python server's line, or Peregrine's "] listening
    on 127.0.0.1:PORT"), or at once when `port` is given (nginx)."""

    def __init__(self, name, argv, cpu, workdir, port=None):
        self.name = name
        self.argv = argv
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), *argv], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, cwd=workdir,
                                     start_new_session=True, preexec_fn=procs.die_with_parent)
        procs.watch(self.proc.pid)
        self.port = port
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if port is None:
                self.log.seek(0)
                for line in self.log.read().decode("utf-8", "replace").splitlines():
                    if "listening on 127.0.0.1:" in line:
                        self.port = int(line.rsplit(":", 1)[1].split()[0])
                        break
            if self.port and self._accepts():
                return
            time.sleep(0.05)
        self.stop()
        raise VerifyError(f"{name} did not start: {' '.join(argv)}\n{procs.tail(self.log_path)}")

    def _accepts(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def pids(self):
        return process_tree(self.proc.pid)

    def cpu(self):
        ns, ticks, _ = cpu_sample(self.pids())
        return ns, ticks

    def rss(self):
        return rss_kb(self.pids())[0]

    def stop(self):
        procs.kill_group(self.proc.pid)
        procs.reap(self.proc)
        self.log.close()


def python_server(mode, cpu, workdir, name):
    return Proc(name, ["/usr/bin/python3", os.path.join(BENCH_DIR, "ws_python_server.py"),
                       "--mode", mode, "--listen", "127.0.0.1:0"], cpu, workdir)


def nginx_proxy(backend_port, workdir, nofile):
    """nginx 1.22 as its documentation proxies WebSocket (Upgrade and Connection passed on,
    HTTP/1.1 to the upstream), one worker, read timeout raised past a run's length."""
    port = procs.free_port()
    conf = nginx_conf(workdir, nofile, "# generated by bench/websocket.py\n", (), f"""\
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        '' close;
    }}
    upstream ws {{
        server 127.0.0.1:{backend_port};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://ws;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }}
    }}
""")
    path = os.path.join(workdir, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    return Proc("nginx", ["nginx", "-p", workdir + "/", "-e", f"{workdir}/error.log", "-c", path],
                SERVER_CPU, workdir, port=port)


# --- measuring -------------------------------------------------------------------------------

def client_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measured(procs_, fn):
    """Runs fn() and returns (its result, {name: (cpu ns, cpu ticks)}, client CPU seconds)."""
    before = {p.name: p.cpu() for p in procs_}
    c0 = client_cpu()
    result = fn()
    c1 = client_cpu()
    after = {p.name: p.cpu() for p in procs_}
    return result, {n: (after[n][0] - before[n][0], after[n][1] - before[n][1])
                    for n in before}, c1 - c0


def rss_growth(procs_, connect):
    """Connects (connect() returns the connections), waits 1 s idle; RSS growth per process."""
    before = {p.name: p.rss() for p in procs_}
    conns = connect()
    time.sleep(1.0)
    return conns, {p.name: p.rss() - before[p.name] for p in procs_}


def row(server, process, messages, wall, cpu, client_s, rss_kb_growth, connections, extra=None):
    ns, ticks = cpu
    r = {"server": server, "process": process, "messages": messages, "seconds": round(wall, 3),
         "messages_per_s": messages / wall if wall else 0.0,
         "cpu_us_per_message": ns / 1000 / messages if messages else None,
         "cpu_us_per_message_ticks": ticks / CLK_TCK * 1e6 / messages if messages else None,
         "server_cpu_util": ns / 1e9 / wall if wall else None,
         "client_cpu_util": client_s / wall if wall else None,
         "rss_kb_growth": rss_kb_growth,
         "rss_kb_per_connection": rss_kb_growth / connections}
    r.update(extra or {})
    return r


def print_row(r):
    if "skipped" in r:
        print(f"  {r['server']:24} skipped: {r['skipped']}", flush=True)
        return
    if "error" in r:
        print(f"  {r['server']:24} FAILED: {r['error']}", flush=True)
        return
    print(f"  {r['server'] + ' ' + r['process']:24} {r['messages_per_s']:>10,.0f} "
          f"{r['cpu_us_per_message']:>9.2f} {r['cpu_us_per_message_ticks']:>8.2f} "
          f"{r['server_cpu_util'] * 100:>6.0f}% {r['client_cpu_util'] * 100:>6.0f}% "
          f"{r['rss_kb_per_connection']:>8.1f}  {r['messages']:,} checked"
          + (f", {r['note']}" if r.get("note") else ""), flush=True)


HEADER = (f"  {'server':24} {'msg/s':>10} {'µs/msg':>9} {'(ticks)':>8} {'srvCPU':>7} "
          f"{'client':>7} {'KB/conn':>8}")


# --- the scenarios ---------------------------------------------------------------------------

def echo_servers(opts, name, workdir, nofile):
    """[(process under test, its label)], every process to stop, the port to connect to."""
    if name == "peregrine":
        p = Proc("peregrine", [opts.peregrine_echo, "--listen", "127.0.0.1:0", "--workers", "1"],
                 SERVER_CPU, workdir)
        return [(p, "")], [p], p.port
    if name == "python":
        p = python_server("echo", SERVER_CPU, workdir, "python")
        return [(p, "")], [p], p.port
    back = python_server("echo", CLIENT_CPU, workdir, "python-backend")
    try:
        front = nginx_proxy(back.port, workdir, nofile)
    except Exception:
        back.stop()
        raise
    return [(front, "(nginx)"), (back, "(python behind)")], [front, back], front.port


def run_echo(opts, name, workdir, nofile):
    measured_procs, to_stop, port = echo_servers(opts, name, workdir, nofile)
    procs_ = [p for p, _ in measured_procs]
    conns = []
    try:
        conns, growth = rss_growth(procs_, lambda: connect_all(port, opts.path, opts.connections,
                                                               opts.sources))
        load = EchoLoad(conns, opts.size, opts.in_flight)
        if opts.warmup:
            load.run(seconds=opts.warmup)
        if opts.messages:
            per_conn = math.ceil(opts.messages / len(conns))
            (done, wall), cpu, client_s = measured(procs_, lambda: load.run(per_conn=per_conn))
        else:
            (done, wall), cpu, client_s = measured(procs_, lambda: load.run(seconds=opts.duration))
        sent = sum(c.sent for c in conns)
        answered = sum(c.received for c in conns)
        if sent != answered:
            raise VerifyError(f"{sent} messages sent, {answered} answered")
        return [row(name, label, done, wall, cpu[p.name], client_s, growth[p.name], len(conns))
                for p, label in measured_procs]
    finally:
        close_all(conns)
        for p in to_stop:
            p.stop()


def run_broadcast(opts, name, workdir, nofile):
    if name == "peregrine":
        srv = Proc("peregrine", [opts.peregrine_echo, "--listen", "127.0.0.1:0", "--workers", "1"],
                   SERVER_CPU, workdir)
        path = "/broadcast"
    elif name == "python":
        srv = python_server("chat", SERVER_CPU, workdir, "python")
        path = opts.path
    else:
        raise ValueError("run_broadcast: " + name)
    conns = []
    try:
        conns, growth = rss_growth([srv], lambda: connect_all(srv.port, path, opts.clients + 1,
                                                              opts.sources))
        unsolicited = drain_unsolicited(conns, 0.5)
        if unsolicited:
            raise VerifyError(f"the server sent {unsolicited} bytes before any message was "
                              f"published (a greeting?): this scenario counts only published "
                              f"messages; first: {bytes(next(c.buf for c in conns if c.buf))[:80]!r}")
        load = BroadcastLoad(conns, opts.size)
        if opts.warmup:
            load.run(3)
        (done, wall, lat), cpu, client_s = measured([srv], lambda: load.run(opts.publishes))
        if done != opts.clients * opts.publishes:
            raise VerifyError(f"{done} deliveries, expected {opts.clients * opts.publishes}")
        lat.sort()
        self_copies = conns[-1].received
        note = (f"fan-out median {lat[len(lat) // 2] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms; "
                f"publisher {'gets' if self_copies else 'does not get'} its own")
        return [row(name, "", done, wall, cpu[srv.name],
                    client_s, growth[srv.name], len(conns),
                    {"note": note, "fanout_ms_median": lat[len(lat) // 2] * 1000,
                     "fanout_ms_max": lat[-1] * 1000})]
    finally:
        close_all(conns)
        srv.stop()


SCENARIOS = {"echo": run_echo, "broadcast": run_broadcast}


def describe(opts, scenario):
    if scenario == "echo":
        load = (f"{opts.messages:,} messages" if opts.messages else f"{opts.duration:g} s")
        return (f"echo: {opts.connections:,} connections, {opts.size}-byte text messages, "
                f"{opts.in_flight} in flight each, {load}")
    return (f"broadcast: {opts.clients:,} clients, {opts.publishes} messages of {opts.size} bytes "
            f"published one at a time (deliveries = clients x messages)")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="echo,broadcast")
    ap.add_argument("--servers", default="peregrine,python,nginx")
    ap.add_argument("--peregrine-echo", default=os.path.join(REPO, "build/release/websocket_echo"))
    ap.add_argument("--path", default="/", help="the WebSocket endpoint's path (default /)")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=1)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--messages", type=int, default=0,
                    help="echo this many messages in all instead of running --duration")
    ap.add_argument("--warmup", type=float, default=1.0,
                    help="echo seconds before measuring (broadcast: 3 messages; 0: none)")
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--publishes", type=int, default=100)
    ap.add_argument("--sources", type=int, default=0,
                    help="source addresses 127.0.0.1..N (default: one per 5,000 connections)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--keep-tmp", action="store_true")
    opts = ap.parse_args(argv)
    scenarios = [s for s in opts.scenarios.split(",") if s]
    servers = [s for s in opts.servers.split(",") if s]
    bad = [s for s in scenarios if s not in SCENARIOS] + \
        [s for s in servers if s not in ("peregrine", "python", "nginx")]
    if bad or opts.in_flight < 1 or opts.size < 1:
        ap.error(f"unknown scenario or server: {', '.join(bad)}" if bad else "bad --in-flight/--size")
    # The python rows' server (run by /usr/bin/python3, Debian's) needs python3-websockets.
    if ("python" in servers or "nginx" in servers) and subprocess.run(
            ["/usr/bin/python3", "-c", "import websockets"], capture_output=True).returncode:
        sys.exit("python3-websockets is missing: apt-get install python3-websockets")

    biggest = max(opts.connections if "echo" in scenarios else 0,
                  opts.clients + 1 if "broadcast" in scenarios else 0)
    opts.sources = opts.sources or max(1, math.ceil(biggest / 5000))
    nofile = raise_nofile(biggest + 100)
    try:
        os.sched_setaffinity(0, {CLIENT_CPU})
    except OSError as e:
        print(f"WARNING: client not pinned to CPU {CLIENT_CPU}: {e}", file=sys.stderr)
    procs.REAPER = procs.Reaper()
    top = tempfile.mkdtemp(prefix="ws-bench-")
    results = []
    failed = False
    try:
        for scenario in scenarios:
            print(describe(opts, scenario), flush=True)
            print(HEADER, flush=True)
            for run in range(opts.runs):
                for server in servers:
                    if server == "nginx" and scenario == "broadcast":
                        if run == 0:
                            # Issue 20 asks for nginx's overhead on the echo server; and 10,000
                            # proxied clients need 20,000 of nginx's descriptors, the hard limit.
                            print_row({"server": "nginx", "skipped": "an echo row only"})
                        continue
                    if server == "peregrine":
                        binary = opts.peregrine_echo
                        if not os.path.exists(binary):
                            r = {"server": server, "skipped": f"{binary} is missing (build it, or "
                                 f"--peregrine-echo PATH)"}
                            print_row(r)
                            results.append(dict(r, scenario=scenario, run=run))
                            continue
                    workdir = os.path.join(top, f"{scenario}-{server}-{run}")
                    os.makedirs(workdir)
                    try:
                        rows = SCENARIOS[scenario](opts, server, workdir, nofile)
                    except VerifyError as e:
                        failed = True
                        rows = [{"server": server, "error": str(e)}]
                    for r in rows:
                        print_row(r)
                        results.append(dict(r, scenario=scenario, run=run))
    finally:
        procs.REAPER.close()
        if not opts.keep_tmp and not failed:
            subprocess.run(["rm", "-rf", top])
        else:
            print(f"server logs and configs kept in {top}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"args": vars(opts), "rows": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
