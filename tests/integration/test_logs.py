"""Access logs: combined format (default), JSON, off, stdout; one line per request, also with
several workers; SIGUSR1 reopens log files; error_log to a file."""

import datetime
import glob
import json
import os
import re
import select
import signal
import subprocess
import threading
import time

from harness import (PEREGRINE_BIN, STATIC_FALLBACK, RawClient, ServerTestCase, lines_held_back,
                     main, make_config, q)

COMBINED = re.compile(
    r'^(?P<ip>\S+) - (?P<user>\S+) \[(?P<time>[^\]]+)\] "(?P<request>[^"]*)" (?P<status>\d{3}) '
    r'(?P<size>\d+|-) "(?P<referer>[^"]*)" "(?P<ua>[^"]*)"$')

FILES = {"hello.txt": b"hello\n", "index.html": b"<p>index</p>\n"}


def read_lines(path):
    try:
        with open(path, "rb") as f:
            return [line.decode("utf-8") for line in f.read().splitlines()]
    except FileNotFoundError:
        return []


def first_key(record, *names):
    for n in names:
        if n in record:
            return record[n]
    raise AssertionError(f"none of the keys {names} in JSON log record {record}")


class AccessLogTest(ServerTestCase):
    def start_with_log(self, fmt=None, workers=1):
        root = self.make_root(FILES)
        self.log_path = os.path.join(self.tmp, "logs", "access.log")
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        site = f"access_log_format = {q(fmt)}" if fmt else ""
        text = make_config(root, site=site, access_log=self.log_path, workers=workers)
        return self.start_config(text)

    def wait_lines(self, n, path=None, timeout=3.0):
        path = path or self.log_path
        return self.wait_for(lambda: (lambda ls: ls if len(ls) >= n else None)(read_lines(path)),
                             timeout=timeout, msg=f"{n} access log line(s) in {path} (have {read_lines(path)})")

    def test_combined_format(self):
        srv = self.start_with_log()
        before = datetime.datetime.now(datetime.timezone.utc)
        status, _, body = self.get(srv.port, "/hello.txt",
                                   {"Referer": "http://ref.example/page", "User-Agent": "it-agent/1.0"})
        self.assertEqual(status, 200)
        lines = self.wait_lines(1)
        self.assertEqual(len(lines), 1, lines)
        m = COMBINED.match(lines[0])
        self.assertIsNotNone(m, f"not a combined log line: {lines[0]!r}")
        self.assertEqual(m["ip"], "127.0.0.1")
        self.assertEqual(m["request"], "GET /hello.txt HTTP/1.1")
        self.assertEqual(m["status"], "200")
        self.assertEqual(m["size"], str(len(body)))
        self.assertEqual(m["referer"], "http://ref.example/page")
        self.assertEqual(m["ua"], "it-agent/1.0")
        t = datetime.datetime.strptime(m["time"], "%d/%b/%Y:%H:%M:%S %z")
        self.assertLess(abs((t - before).total_seconds()), 30, m["time"])

    def test_one_line_per_request_with_missing_fields(self):
        srv = self.start_with_log()
        with RawClient(srv.port) as c:
            c.send(b"GET /hello.txt?a=1&b=2 HTTP/1.1\r\nHost: x\r\n\r\n")
            r1 = c.read_response()
            c.send(b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
            r2 = c.read_response()
            c.send(b"HEAD /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            c.read_response(head_request=True)
        with RawClient(srv.port) as c:
            c.send(b"GET / HTTP/1.0\r\n\r\n")
            r4 = c.read_response()
        lines = self.wait_lines(4)
        time.sleep(0.3)
        lines = read_lines(self.log_path)
        self.assertEqual(len(lines), 4, lines)
        parsed = [COMBINED.match(line) for line in lines]
        self.assertTrue(all(parsed), lines)
        # A HEAD sends no body: "0" (nginx) or "-" (Apache's %b) are both the combined format.
        got = [(m["request"], m["status"], "0" if m["size"] == "-" else m["size"], m["referer"], m["ua"])
               for m in parsed]
        self.assertEqual(got, [
            ("GET /hello.txt?a=1&b=2 HTTP/1.1", "200", str(len(r1.body)), "-", "-"),
            ("GET /missing HTTP/1.1", "404", str(len(r2.body)), "-", "-"),
            ("HEAD /hello.txt HTTP/1.1", "200", "0", "-", "-"),
            ("GET / HTTP/1.0", "200", str(len(r4.body)), "-", "-"),
        ])

    def test_combined_escapes_quotes(self):
        srv = self.start_with_log()
        self.get(srv.port, "/hello.txt", {"User-Agent": 'evil" 200 "x', "Referer": "a\\b"})
        lines = self.wait_lines(1)
        self.assertEqual(len(lines), 1, lines)
        # The raw quote must not appear unescaped: the line keeps exactly the fields of the format.
        self.assertNotIn('evil" 200 "x', lines[0], f"unescaped quote in the log: {lines[0]!r}")
        self.assertTrue(lines[0].startswith('127.0.0.1 - - ['), lines[0])

    def test_json_format(self):
        srv = self.start_with_log("json")
        status, _, body = self.get(srv.port, "/hello.txt?x=1",
                                   {"User-Agent": 'json "agent" \\ \u00e9', "Referer": "http://r.example/"})
        self.get(srv.port, "/nope")
        lines = self.wait_lines(2)
        self.assertEqual(len(lines), 2, lines)
        recs = []
        for line in lines:
            try:
                recs.append(json.loads(line))
            except ValueError as e:
                self.fail(f"access log line is not JSON ({e}): {line!r}")
        rec = recs[0]
        self.assertTrue(str(first_key(rec, "time", "timestamp", "ts", "time_local", "time_iso8601")))
        self.assertEqual(first_key(rec, "remote_addr", "remote", "client", "client_ip", "ip"), "127.0.0.1")
        self.assertEqual(first_key(rec, "method", "request_method"), "GET")
        self.assertIn(first_key(rec, "path", "uri", "request_uri", "target"), ("/hello.txt", "/hello.txt?x=1"))
        self.assertEqual(int(first_key(rec, "status")), 200)
        self.assertEqual(int(first_key(rec, "bytes", "body_bytes_sent", "bytes_sent", "size")), len(body))
        self.assertEqual(first_key(rec, "user_agent", "http_user_agent", "ua", "userAgent"),
                         'json "agent" \\ \u00e9')
        self.assertEqual(int(first_key(recs[1], "status")), 404)

    def test_off(self):
        root = self.make_root(FILES)
        before = set(os.listdir(self.tmp))
        srv = self.start_config(make_config(root, access_log="off"))
        for _ in range(3):
            self.get(srv.port, "/hello.txt", {"User-Agent": "should-not-be-logged"})
        self.stop_ok(srv)
        self.assertEqual(srv.stdout(), "", "access_log = off but stdout got output")
        self.assertNotIn("should-not-be-logged", srv.stderr())
        self.assertNotIn("GET /hello.txt", srv.stderr())
        new = set(os.listdir(self.tmp)) - before
        self.assertEqual({n for n in new if not n.startswith("peregrine")}, set(), "unexpected files created")

    def test_sigterm_flushes(self):
        srv = self.start_with_log()
        for i in range(7):
            self.get(srv.port, f"/hello.txt?i={i}")
        self.stop_ok(srv)
        lines = read_lines(self.log_path)
        self.assertEqual([COMBINED.match(line)["request"] for line in lines],
                         [f"GET /hello.txt?i={i} HTTP/1.1" for i in range(7)])

    def test_many_workers_many_lines(self):
        srv = self.start_with_log(workers=2)
        n_threads, per_thread = 6, 50
        errors = []

        def run(t):
            try:
                with RawClient(srv.port) as c:
                    for i in range(per_thread):
                        r = c.request("GET", f"/hello.txt?t={t}&i={i}", {"User-Agent": f"thread-{t}"})
                        if r.status != 200:
                            errors.append(r.status)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=run, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.stop_ok(srv)
        lines = read_lines(self.log_path)
        self.assertEqual(len(lines), n_threads * per_thread)
        seen = set()
        for line in lines:
            m = COMBINED.match(line)
            self.assertIsNotNone(m, f"garbled line (interleaved writes?): {line!r}")
            seen.add(m["request"])
        self.assertEqual(len(seen), n_threads * per_thread, "duplicate or missing request lines")

    def test_sigusr1_reopens(self):
        srv = self.start_with_log()
        self.get(srv.port, "/hello.txt?before")
        self.wait_lines(1)
        rotated = self.log_path + ".1"
        os.rename(self.log_path, rotated)
        srv.signal(signal.SIGUSR1)
        self.wait_for(lambda: os.path.exists(self.log_path), timeout=3,
                      msg="the access log to be re-created at its path after SIGUSR1")
        self.get(srv.port, "/hello.txt?after")
        new_lines = self.wait_lines(1)
        self.assertEqual(len(new_lines), 1, new_lines)
        self.assertIn("GET /hello.txt?after HTTP/1.1", new_lines[0])
        old = read_lines(rotated)
        self.assertEqual(len(old), 1, old)
        self.assertIn("GET /hello.txt?before HTTP/1.1", old[0])
        self.assertTrue(srv.running())


class StdoutAndQuickModeLogTest(ServerTestCase):
    def test_quick_mode_stdout(self):
        root = self.make_root(FILES)
        srv = self.start_quick(root, access_log="stdout")
        self.get(srv.port, "/hello.txt", {"User-Agent": "quick-ua"})
        line = self.wait_for(lambda: [ln for ln in srv.stdout().splitlines() if "quick-ua" in ln],
                             timeout=3, msg="the access log line on stdout")[0]
        m = COMBINED.match(line)
        self.assertIsNotNone(m, line)
        self.assertEqual((m["request"], m["status"]), ("GET /hello.txt HTTP/1.1", "200"))

    def test_quick_mode_path(self):
        root = self.make_root(FILES)
        path = os.path.join(self.tmp, "quick-access.log")
        srv = self.start_quick(root, access_log=path)
        self.get(srv.port, "/hello.txt")
        self.stop_ok(srv)
        lines = read_lines(path)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn('"GET /hello.txt HTTP/1.1" 200 6 ', lines[0])

    def test_quick_mode_off(self):
        root = self.make_root(FILES)
        srv = self.start_quick(root, access_log="off")
        self.get(srv.port, "/hello.txt")
        self.stop_ok(srv)
        self.assertNotIn("GET /hello.txt", srv.stdout() + srv.stderr())


class ErrorLogTest(ServerTestCase):
    def test_error_log_file_and_reopen(self):
        root = self.make_root(FILES)
        err_path = os.path.join(self.tmp, "error.log")
        text = make_config(root, top=f"error_log = {q(err_path)}")
        srv = self.start_config(text, log_path=err_path)
        self.assertIn("listening on 127.0.0.1:", "\n".join(read_lines(err_path)))
        os.rename(err_path, err_path + ".1")
        srv.signal(signal.SIGUSR1)
        self.wait_for(lambda: os.path.exists(err_path), timeout=3,
                      msg="the error log to be re-created at its path after SIGUSR1")
        self.assertEqual(self.get(srv.port, "/hello.txt")[0], 200)


# A route whose every request logs an error line: a back end nobody listens on, never marked
# down (max_fails = 0), so each request tries it and fails.
DEAD_UPSTREAM = """
[[upstream]]
name = "dead"
servers = ["127.0.0.1:1"]
max_fails = 0
tries = 1
"""
DEAD_ROUTE = '[[site.route]]\nprefix = "/dead"\nproxy = "http://dead"\n' + STATIC_FALLBACK
DEAD_LINE = "proxy upstream 127.0.0.1:1 "
# A request the parser refuses (400, the connection closed): one info line each, not throttled.
BAD_REQUEST = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n"
BAD_LINE = "client sent a bad request (400)"


class ClientErrorLineTest(ServerTestCase):
    """A line about a client's bad request ends with `client: ADDR`, as nginx's do: an operator
    (or fail2ban) can tell who sent it."""

    def test_a_bad_head_and_a_bad_chunked_body_name_the_client(self):
        srv = self.start_config(make_config(self.make_root(FILES)))
        bad_body = (b"POST /hello.txt HTTP/1.1\r\nHost: localhost\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
        for request in (BAD_REQUEST, bad_body):
            with RawClient(srv.port) as c:
                c.send(request)
                self.assertEqual(c.read_final_response().status, 400)
        self.wait_for(lambda: "malformed chunked body, client: 127.0.0.1\n" in srv.stderr(),
                      msg="the chunked body's line")
        self.assertRegex(srv.stderr(),
                         r"client sent a bad request \(400\): [^\n]+, client: 127\.0\.0\.1\n")


class ErrorLogUnderLoadTest(ServerTestCase):
    def client_loop(self, port, stop, counts, errors, keepalive):
        """Requests /dead (502, one error line each, throttled), /hello.txt (200) and a bad
        request (400, one info line each) until `stop`. Every response must be exactly what was
        asked for: a log line that reached a client socket would show up as garbage in the
        stream."""
        conn = None
        i = 0
        while not stop.is_set():
            path = ("/dead", "/hello.txt", "bad")[i % 3]
            i += 1
            if conn is None:
                conn = RawClient(port, timeout=10)
            try:
                if path == "bad":
                    conn.send(BAD_REQUEST)
                    r = conn.read_final_response()
                else:
                    r = conn.request("GET", path, headers={} if keepalive else {"Connection": "close"})
            except Exception as e:  # noqa: BLE001 - any failure is reported
                errors.append(f"{path}: {e!r}")
                conn.close()
                conn = None
                continue
            want = {"/dead": (502, None), "/hello.txt": (200, b"hello\n"), "bad": (400, None)}[path]
            if r.status != want[0] or (want[1] is not None and r.body != want[1]):
                errors.append(f"{path}: unexpected {r!r}")
            counts[path] = counts.get(path, 0) + 1
            if not keepalive or "close" in r.connection_tokens():
                conn.close()
                conn = None
        if conn:
            conn.close()

    def test_reopen_while_workers_log(self):
        """logrotate's way, ten times under load: rename both logs, SIGUSR1. No log line may
        reach a client (the old code closed a descriptor number a worker could still write to,
        and accept4 could hand that number to a client), and every line lands in some file."""
        root = self.make_root(FILES)
        err_path = os.path.join(self.tmp, "error.log")
        acc_path = os.path.join(self.tmp, "access.log")
        text = make_config(root, top=f"error_log = {q(err_path)}\n{DEAD_UPSTREAM}", workers=2,
                           access_log=acc_path, routes=DEAD_ROUTE)
        srv = self.start_config(text, log_path=err_path)
        stop = threading.Event()
        errors = []
        counts = [dict() for _ in range(4)]
        threads = [threading.Thread(target=self.client_loop,
                                    args=(srv.port, stop, counts[i], errors, i % 2 == 0))
                   for i in range(4)]
        for t in threads:
            t.start()
        try:
            for n in range(10):
                time.sleep(0.3)
                os.rename(err_path, f"{err_path}.{n}")
                os.rename(acc_path, f"{acc_path}.{n}")
                srv.signal(signal.SIGUSR1)
            time.sleep(0.5)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        self.assertEqual(errors[:5], [])
        dead = sum(c.get("/dead", 0) for c in counts)
        bad = sum(c.get("bad", 0) for c in counts)
        total = dead + bad + sum(c.get("/hello.txt", 0) for c in counts)
        self.assertGreater(bad, 50, "too little load to test anything")
        self.stop_ok(srv)  # flushes the access log and the counts of lines held back
        err_lines = [line for p in glob.glob(err_path + "*") for line in read_lines(p)]
        acc_lines = [line for p in glob.glob(acc_path + "*") for line in read_lines(p)]
        self.assertEqual(sum(BAD_LINE in line for line in err_lines), bad)
        # The back end's failures: a few lines a second, and the count of the rest.
        written = sum(DEAD_LINE in line for line in err_lines)
        self.assertEqual(written + lines_held_back("\n".join(err_lines)), dead)
        self.assertEqual(len(acc_lines), total)
        # The files created by the last SIGUSR1 were written to.
        self.assertTrue(any(BAD_LINE in line for line in read_lines(err_path)))
        self.assertTrue(read_lines(acc_path))

    def test_blocked_error_log_does_not_stop_serving(self):
        """stderr is a pipe nobody reads: the lines of 6000 bad requests fill it and the
        server's queue (256 KiB). Serving goes on; the lines dropped are counted and reported
        once the reader is back."""
        root = self.make_root(FILES)
        config = self.write_config(make_config(root, workers=2))
        proc = subprocess.Popen([PEREGRINE_BIN, "-c", config], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            head = b""
            deadline = time.monotonic() + 10
            while b"peregrine started" not in head and time.monotonic() < deadline:
                if select.select([proc.stderr], [], [], 0.5)[0]:
                    head += os.read(proc.stderr.fileno(), 65536)
            port = int(re.search(rb"listening on 127\.0\.0\.1:(\d+)", head).group(1))
            # No more reading from here on.
            statuses = []
            t0 = time.monotonic()
            for i in range(6000):
                with RawClient(port) as conn:
                    conn.send(BAD_REQUEST)
                    statuses.append(conn.read_final_response().status)
            self.assertEqual(set(statuses), {400})
            self.assertLess(time.monotonic() - t0, 60)
            # The reader comes back; the next error line's write reports the drops.
            got = bytearray()
            stop = threading.Event()

            def drain():
                while not stop.is_set():
                    if select.select([proc.stderr], [], [], 0.2)[0]:
                        chunk = os.read(proc.stderr.fileno(), 65536)
                        if not chunk:
                            return
                        got.extend(chunk)

            reader = threading.Thread(target=drain)
            reader.start()
            try:
                self.wait_for(lambda: b"dropped because the log could not keep up" in got,
                              timeout=10, msg="the dropped-lines report on stderr")
                m = re.search(rb"error log: (\d+) line\(s\) dropped", bytes(got))
                self.assertGreater(int(m.group(1)), 0)
                self.assertEqual(self.get(port, "/hello.txt")[0], 200)
                proc.send_signal(signal.SIGTERM)
                self.assertEqual(proc.wait(10), 0)
            finally:
                stop.set()
                reader.join()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()


if __name__ == "__main__":
    main()
