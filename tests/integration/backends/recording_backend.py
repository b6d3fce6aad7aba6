"""Back ends that record every byte they receive and decode it strictly, for the smuggling table
(tests/integration/test_smuggling.py).

Each listens on 127.0.0.1:0 in this process (threads, so a test reads what they saw without a
control channel) and answers every request it decodes with a minimal valid response:

- HttpRecorder: parses the bytes as HTTP/1.1 requests (RFC 9112, no leniency: CRLF only, token
  method, a target without whitespace or control bytes, `HTTP/1.1`, one Host, Content-Length or
  chunked, never both) and answers 200 with Content-Length, keeping the connection. Bytes after a
  request are parsed as the next request, which is how a back end runs a smuggled one.
- FastcgiRecorder: decodes FCGI_BEGIN_REQUEST, FCGI_PARAMS and FCGI_STDIN records and answers
  FCGI_STDOUT and FCGI_END_REQUEST.
- AjpRecorder: decodes AJP13 FORWARD_REQUEST packets and their body packets (asking for more with
  GET_BODY_CHUNK as Tomcat does), answers CPING with CPONG, and answers each request with
  SEND_HEADERS, SEND_BODY_CHUNK and END_RESPONSE (reuse).

Every request becomes a Seen(method, target, authority, headers, body); anything that does not
decode becomes a garbage entry with the bytes; take() returns them, with the bytes left over that
do not (yet) make a whole request, and starts afresh.
"""

import re
import socket
import struct
import threading

TCHAR = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]"
REQUEST_LINE = re.compile(rb"^(" + TCHAR + rb"+) ([\x21-\x7e]+) HTTP/1\.1$")
FIELD_LINE = re.compile(rb"^(" + TCHAR + rb"+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*$")
MAX_HEAD = 64 * 1024


class Seen:
    """One request as a back end decoded it. headers: [(lower-case name, value)], as str
    (latin-1); body: bytes."""

    def __init__(self, kind, method, target, authority, headers, body, extra=None):
        self.kind, self.method, self.target, self.authority = kind, method, target, authority
        self.headers, self.body, self.extra = headers, body, extra or {}

    def header_all(self, name):
        return [v for k, v in self.headers if k == name.lower()]

    def __repr__(self):
        return (f"<{self.kind} {self.method} {self.target!r} authority={self.authority!r} "
                f"headers={self.headers} body={self.body[:120]!r}>")


class Garbage(Exception):
    """The bytes are not what the protocol allows: the back end would misread them."""


class NeedMore(Exception):
    pass


class Recorder:
    """A listener on 127.0.0.1:0; each connection in a thread of its own, its bytes in a buffer
    that decode() takes whole messages from."""

    kind = "?"

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.seen = []  # Seen, in the order decoded
        self.garbage = []  # (why, bytes)
        self.connections = []  # [socket, bytearray buffer]
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            state = [conn, bytearray(), {}]  # socket, bytes not decoded yet, decoder state
            with self.lock:
                self.connections.append(state)
            threading.Thread(target=self._serve, args=(state,), daemon=True).start()

    def _serve(self, state):
        conn = state[0]
        conn.settimeout(None)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                replies = []
                with self.lock:
                    state[1] += data
                    while state[1]:
                        try:
                            used, seen, reply = self.decode(bytes(state[1]), state[2])
                        except NeedMore:
                            break
                        except Garbage as e:
                            self.garbage.append((str(e), bytes(state[1][:400])))
                            state[1].clear()
                            replies.append(None)  # a confused back end hangs up
                            break
                        del state[1][:used]
                        if seen is not None:
                            self.seen.append(seen)
                        if reply:
                            replies.append(reply)
                for reply in replies:
                    if reply is None:
                        return
                    conn.sendall(reply)
        except OSError:
            pass
        finally:
            with self.lock:
                if state in self.connections:
                    self.connections.remove(state)
            try:
                conn.close()
            except OSError:
                pass

    def decode(self, buf, ctx):
        """(bytes used, Seen or None, reply bytes or b"") for the message at the front of `buf`;
        raises NeedMore or Garbage. `ctx`: a dict of the connection's own, for a decoder that
        keeps state between messages."""
        raise NotImplementedError

    def take(self):
        """(requests seen, garbage, leftover bytes per connection) since the last take(), all of
        which it forgets: a request decoded after one take() is in the next, never lost. Bytes
        left over are dropped with the connection's decoder state, so that a connection that
        went wrong in one case does not fail the next ones too."""
        with self.lock:
            seen, garbage = list(self.seen), list(self.garbage)
            self.seen.clear()
            self.garbage.clear()
            leftovers = []
            for state in self.connections:
                if state[1] or state[2]:
                    leftovers.append(bytes(state[1]) or repr(state[2])[:400].encode())
                state[1].clear()
                state[2].clear()
            return seen, garbage, leftovers

    def close(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5)
        self.listener.close()
        with self.lock:
            conns = [s[0] for s in self.connections]
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ------------------------------------------------------------------------------------------
# HTTP/1.1
# ------------------------------------------------------------------------------------------

def parse_http_request(buf):
    """(bytes used, method, target, headers, body) of the HTTP/1.1 request at the front of
    `buf`, parsed strictly; NeedMore or Garbage."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise Garbage("request head over 64 KiB")
        if b"\n" in buf.replace(b"\r\n", b"") or b"\r" in buf.replace(b"\r\n", b"")[:-1]:
            raise Garbage("bare CR or LF in a request head")
        raise NeedMore()
    head = buf[:end]
    lines = head.split(b"\r\n")
    for line in lines:
        if b"\r" in line or b"\n" in line or b"\0" in line:
            raise Garbage(f"bare CR, LF or NUL in {line!r}")
    m = REQUEST_LINE.match(lines[0])
    if not m:
        raise Garbage(f"not an HTTP/1.1 request line: {lines[0]!r}")
    method, target = m.group(1).decode(), m.group(2).decode("latin-1")
    headers = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            raise Garbage(f"obs-fold: {line!r}")
        f = FIELD_LINE.match(line)
        if not f:
            raise Garbage(f"not a field line: {line!r}")
        headers.append((f.group(1).decode().lower(), f.group(2).decode("latin-1")))
    hosts = [v for k, v in headers if k == "host"]
    if len(hosts) != 1:
        raise Garbage(f"{len(hosts)} Host fields")
    te = [v for k, v in headers if k == "transfer-encoding"]
    cl = [v for k, v in headers if k == "content-length"]
    at = end + 4
    if te and cl:
        raise Garbage("both Transfer-Encoding and Content-Length")
    if te:
        if te != ["chunked"]:
            raise Garbage(f"Transfer-Encoding {te}")
        body = bytearray()
        while True:
            eol = buf.find(b"\r\n", at)
            if eol < 0:
                raise NeedMore()
            size_text = buf[at:eol]
            if not re.fullmatch(rb"[0-9A-Fa-f]{1,8}", size_text):
                raise Garbage(f"chunk size {size_text!r}")
            size = int(size_text, 16)
            at = eol + 2
            if size == 0:
                if buf[at:at + 2] == b"\r\n":  # no trailers from us
                    return at + 2, method, target, headers, bytes(body)
                if len(buf) < at + 2:
                    raise NeedMore()
                raise Garbage("trailer fields after the last chunk")
            if len(buf) < at + size + 2:
                raise NeedMore()
            body += buf[at:at + size]
            if buf[at + size:at + size + 2] != b"\r\n":
                raise Garbage("chunk data not followed by CRLF")
            at += size + 2
    if cl:
        if len(cl) != 1 or not re.fullmatch(r"[0-9]{1,15}", cl[0]):
            raise Garbage(f"Content-Length {cl}")
        n = int(cl[0])
        if len(buf) < at + n:
            raise NeedMore()
        return at + n, method, target, headers, buf[at:at + n]
    return at, method, target, headers, b""


class HttpRecorder(Recorder):
    kind = "http"
    REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

    def decode(self, buf, ctx):
        used, method, target, headers, body = parse_http_request(buf)
        host = [v for k, v in headers if k == "host"][0]
        return used, Seen(self.kind, method, target, host, headers, body), self.REPLY


# ------------------------------------------------------------------------------------------
# FastCGI
# ------------------------------------------------------------------------------------------

FCGI_BEGIN_REQUEST, FCGI_ABORT_REQUEST, FCGI_END_REQUEST = 1, 2, 3
FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT = 4, 5, 6
FCGI_KEEP_CONN = 1


def fcgi_record(rtype, request_id, content):
    padding = (8 - len(content) % 8) % 8
    return (struct.pack("!BBHHBB", 1, rtype, request_id, len(content), padding, 0) + content
            + b"\0" * padding)


def fcgi_pairs(data):
    """The name-value pairs of a PARAMS stream (FastCGI 1.0 section 3.4), strictly."""
    pairs, at = [], 0

    def length():
        nonlocal at
        if at >= len(data):
            raise Garbage("PARAMS stream cut inside a length")
        if data[at] < 0x80:
            at += 1
            return data[at - 1]
        if at + 4 > len(data):
            raise Garbage("PARAMS stream cut inside a length")
        n = struct.unpack("!I", data[at:at + 4])[0] & 0x7FFFFFFF
        at += 4
        return n

    while at < len(data):
        nlen = length()
        vlen = length()
        if at + nlen + vlen > len(data):
            raise Garbage("PARAMS stream cut inside a pair")
        pairs.append((data[at:at + nlen].decode("latin-1"),
                      data[at + nlen:at + nlen + vlen].decode("latin-1")))
        at += nlen + vlen
    return pairs


class FastcgiRecorder(Recorder):
    """One FastCGI request at a time per connection (the server multiplexes none)."""

    kind = "fastcgi"

    def decode(self, buf, ctx):
        at = 0
        request_id, keep, params, stdin = None, False, bytearray(), bytearray()
        params_done = False
        while True:
            if len(buf) < at + 8:
                raise NeedMore()
            version, rtype, rid, clen, plen, _ = struct.unpack("!BBHHBB", buf[at:at + 8])
            if version != 1:
                raise Garbage(f"record version {version}")
            if len(buf) < at + 8 + clen + plen:
                raise NeedMore()
            content = buf[at + 8:at + 8 + clen]
            at += 8 + clen + plen
            if rtype == FCGI_ABORT_REQUEST and request_id is None:
                return at, None, b""  # for a request already answered: nothing to do
            if request_id is None:
                if rtype != FCGI_BEGIN_REQUEST or clen != 8:
                    raise Garbage(f"record type {rtype} before FCGI_BEGIN_REQUEST")
                role, flags = struct.unpack("!HB5x", content)
                if role != 1:
                    raise Garbage(f"role {role}")
                request_id, keep = rid, bool(flags & FCGI_KEEP_CONN)
                continue
            if rid != request_id:
                raise Garbage(f"record for request {rid} inside request {request_id}")
            if rtype == FCGI_PARAMS and not params_done:
                if clen == 0:
                    params_done = True
                else:
                    params += content
            elif rtype == FCGI_STDIN and params_done:
                if clen == 0:
                    break
                stdin += content
            elif rtype == FCGI_ABORT_REQUEST:
                return at, None, self.reply(request_id)
            else:
                raise Garbage(f"record type {rtype} out of order")
        pairs = fcgi_pairs(bytes(params))
        env = dict(pairs)
        headers = [(k[5:].lower().replace("_", "-"), v) for k, v in pairs if k.startswith("HTTP_")]
        if "CONTENT_LENGTH" in env and env["CONTENT_LENGTH"] != "" and \
                int(env["CONTENT_LENGTH"]) != len(stdin):
            raise Garbage(f"CONTENT_LENGTH {env['CONTENT_LENGTH']} with {len(stdin)} bytes of stdin")
        seen = Seen(self.kind, env.get("REQUEST_METHOD"), env.get("REQUEST_URI"),
                    env.get("HTTP_HOST"), headers, bytes(stdin), extra={"params": pairs, "keep": keep})
        return at, seen, self.reply(request_id)

    @staticmethod
    def reply(request_id):
        out = b"Status: 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
        return (fcgi_record(FCGI_STDOUT, request_id, out) + fcgi_record(FCGI_STDOUT, request_id, b"")
                + fcgi_record(FCGI_END_REQUEST, request_id, b"\0" * 8))


# ------------------------------------------------------------------------------------------
# AJP13
# ------------------------------------------------------------------------------------------

AJP_METHODS = ["OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "PROPFIND", "PROPPATCH",
               "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "ACL", "REPORT", "VERSION-CONTROL",
               "CHECKIN", "CHECKOUT", "UNCHECKOUT", "SEARCH", "MKWORKSPACE", "UPDATE", "LABEL",
               "MERGE", "BASELINE-CONTROL", "MKACTIVITY"]
AJP_HEADERS = ["accept", "accept-charset", "accept-encoding", "accept-language", "authorization",
               "connection", "content-type", "content-length", "cookie", "cookie2", "host",
               "pragma", "referer", "user-agent"]
AJP_MAX_CHUNK = 8192 - 6


class AjpCursor:
    def __init__(self, data):
        self.data, self.at = data, 0

    def byte(self):
        if self.at >= len(self.data):
            raise Garbage("FORWARD_REQUEST cut short")
        self.at += 1
        return self.data[self.at - 1]

    def u16(self):
        if self.at + 2 > len(self.data):
            raise Garbage("FORWARD_REQUEST cut short")
        self.at += 2
        return struct.unpack(">H", self.data[self.at - 2:self.at])[0]

    def string(self):
        n = self.u16()
        if n == 0xFFFF:
            return None
        if self.at + n + 1 > len(self.data) or self.data[self.at + n] != 0:
            raise Garbage("AJP string without its NUL")
        s = self.data[self.at:self.at + n].decode("latin-1")
        self.at += n + 1
        return s


def ajp_string(text):
    data = text.encode("latin-1")
    return struct.pack(">H", len(data)) + data + b"\0"


def ajp_packet(payload):
    return b"AB" + struct.pack(">H", len(payload)) + payload


def parse_forward_request(payload):
    c = AjpCursor(payload)
    if c.byte() != 2:
        raise Garbage("not a FORWARD_REQUEST")
    code = c.byte()
    protocol, uri, remote_addr, remote_host, server_name = (c.string() for _ in range(5))
    server_port, is_ssl = c.u16(), c.byte()
    headers = []
    for _ in range(c.u16()):
        n = c.u16()
        if n >= 0xA001 and n - 0xA001 < len(AJP_HEADERS):
            name = AJP_HEADERS[n - 0xA001]
        else:
            c.at -= 2
            name = c.string().lower()
        headers.append((name, c.string()))
    attributes = {}
    while True:
        a = c.byte()
        if a == 0xFF:
            break
        if a == 0x0A:
            attributes[c.string()] = c.string()
        elif a == 0x0B:
            attributes["ssl_key_size"] = c.u16()
        elif 1 <= a <= 0x0D:
            attributes[a] = c.string()
        else:
            raise Garbage(f"attribute code {a}")
    if c.at != len(payload):
        raise Garbage("bytes after the attributes")
    if code == 0xFF:
        method = attributes.get(0x0D)
    elif 1 <= code <= len(AJP_METHODS):
        method = AJP_METHODS[code - 1]
    else:
        raise Garbage(f"method code {code}")
    return {"method": method, "protocol": protocol, "uri": uri, "server_name": server_name,
            "server_port": server_port, "is_ssl": is_ssl, "headers": headers,
            "query": attributes.get(0x05), "secret": attributes.get(0x0C),
            "remote_addr": remote_addr, "remote_host": remote_host}


class AjpRecorder(Recorder):
    """A request is its FORWARD_REQUEST and its body packets: with a Content-Length the first
    comes unasked and the rest are asked for; without one every packet is asked for until an
    empty one ends the body, as Tomcat reads a body of unknown length."""

    kind = "ajp"
    GET_BODY = ajp_packet(bytes([6]) + struct.pack(">H", AJP_MAX_CHUNK))
    REPLY = (ajp_packet(bytes([4]) + struct.pack(">H", 200) + ajp_string("OK") + struct.pack(">H", 1)
                        + struct.pack(">H", 0xA007) + ajp_string("text/plain"))
             + ajp_packet(bytes([3]) + struct.pack(">H", 2) + b"ok\0")
             + ajp_packet(bytes([5, 1])))

    def decode(self, buf, ctx):
        if len(buf) < 4:
            raise NeedMore()
        if buf[:2] != b"\x12\x34":
            raise Garbage(f"packet starts with {buf[:2]!r}, not 0x12 0x34")
        length = struct.unpack(">H", buf[2:4])[0]
        if len(buf) < 4 + length:
            raise NeedMore()
        payload, used = buf[4:4 + length], 4 + length
        request = ctx.get("request")
        if request is None:  # between requests: a FORWARD_REQUEST, or a CPING
            if payload == b"\x0a":
                return used, None, ajp_packet(b"\x09")
            request = parse_forward_request(payload)
            request["body"] = b""
            cl = [v for k, v in request["headers"] if k == "content-length"]
            if len(cl) > 1 or (cl and not re.fullmatch(r"[0-9]{1,15}", cl[0])):
                raise Garbage(f"Content-Length {cl}")
            request["length"] = int(cl[0]) if cl else None
            if request["length"] == 0:
                return used, self.seen_of(request), self.REPLY
            ctx["request"] = request
            # A known length: its first packet comes unasked. Unknown: ask, as Tomcat does for
            # any request without a Content-Length (an empty packet answers a bodiless one).
            return used, None, b"" if request["length"] else self.GET_BODY
        # A body packet: its own 16-bit length, then the data; an empty packet ends the body.
        if length == 0:
            if request["length"] is not None:
                raise Garbage("an empty body packet before the Content-Length was reached")
            del ctx["request"]
            return used, self.seen_of(request), self.REPLY
        if length < 2 or struct.unpack(">H", payload[:2])[0] != length - 2:
            raise Garbage(f"body packet of {length} bytes with a bad data length")
        request["body"] += payload[2:]
        if request["length"] is None:
            return used, None, self.GET_BODY
        if len(request["body"]) > request["length"]:
            raise Garbage("more body than the Content-Length")
        if len(request["body"]) < request["length"]:
            return used, None, self.GET_BODY
        del ctx["request"]
        return used, self.seen_of(request), self.REPLY

    def seen_of(self, r):
        hosts = [v for k, v in r["headers"] if k == "host"]
        target = r["uri"] + ("?" + r["query"] if r["query"] else "")
        return Seen(self.kind, r["method"], target, hosts[0] if len(hosts) == 1 else hosts,
                    r["headers"], r["body"], extra=r)
