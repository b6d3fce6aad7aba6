"""The load: wrk, h2load, peregrine-bench and ab runs with their output parsed, and the idle10k
client (plain or TLS)."""

import errno
import json
import os
import re
import selectors
import shlex
import shutil
import socket
import subprocess
import ssl
import sys
import time

from . import measure
from .common import CLIENT_CPU, RUN_PY, BenchError, ServerError
from .procs import die_with_parent, kill_group, raise_nofile, run_cmd
from .scenarios import AB_CONCURRENCY, AB_REQUESTS

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise BenchError(f"cannot parse wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out):
    r = {}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise BenchError("wrk output has no Requests/sec line:\n" + out)
    r["rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+),", out)
    r["requests"] = int(m.group(1))
    r["wrk_seconds"] = to_ms(m.group(2) + m.group(3)) / 1e3
    pct = {}
    for pm in re.finditer(r"^\s+(\d+)%\s+([\d.]+\w+)\s*$", out, re.M):
        pct[int(pm.group(1))] = to_ms(pm.group(2))
    r["p50_ms"] = pct.get(50)
    r["p99_ms"] = pct.get(99)
    se = {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        se = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups())))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    non2xx = int(m.group(1)) if m else 0
    r["socket_errors"] = se
    r["non_2xx_3xx"] = non2xx
    r["errors"] = sum(se.values()) + non2xx
    return r


def url_for(port, sc):
    scheme = "https" if sc.get("tls") else "http"
    return f"{scheme}://127.0.0.1:{port}{sc['path']}"


def wrk_command(port, sc, duration):
    cmd = ["taskset", "-c", CLIENT_CPU, "wrk", "-t1", f"-c{sc['conns']}", f"-d{duration}s", "--latency"]
    if sc["close"]:
        cmd += ["-H", "Connection: close"]
    cmd.append(url_for(port, sc))
    return cmd


def parse_h2load(out):
    """h2load's summary: requests that succeeded count; failed, errored, timed-out requests and
    4xx/5xx responses are errors. h2load prints no percentiles of its own."""
    r = {}
    m = re.search(r"finished in ([\d.]+)(\w+), ([\d.]+) req/s", out)
    if not m:
        raise BenchError("h2load output has no 'finished in' line:\n" + out)
    r["wrk_seconds"] = to_ms(m.group(1) + m.group(2)) / 1e3
    r["rps"] = float(m.group(3))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", out)
    if not m:
        raise BenchError("h2load output has no 'requests:' line:\n" + out)
    total, started, done, ok, failed, errored, timeout = map(int, m.groups())
    r["requests"] = ok
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    bad_status = int(m.group(3)) + int(m.group(4)) if m else 0
    r["p50_ms"] = r["p99_ms"] = None
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
    r["mean_ms"] = to_ms(m.group(3)) if m else None
    r["socket_errors"] = {"failed": failed, "errored": errored, "timeout": timeout}
    r["non_2xx_3xx"] = bad_status
    r["errors"] = failed + errored + timeout + bad_status
    m = re.search(r"Application protocol: (\S+)", out)
    r["protocol"] = m.group(1) if m else None
    if r["protocol"] not in (None, "h2", "h2c"):
        r["errors"] += 1  # h2load fell back to HTTP/1.1: not what this row measures
    return r


def h2load_command(port, sc, duration):
    return ["taskset", "-c", CLIENT_CPU, "h2load", "-t1", "-c", str(sc["conns"]), "-m", str(sc.get("streams", 1)),
            "-D", str(duration), url_for(port, sc)]


def parse_pb(out):
    """peregrine-bench --json: the same fields as wrk's, plus its TLS and HTTP/2 counters."""
    try:
        j = json.loads(out)
    except ValueError:
        raise BenchError("peregrine-bench printed no JSON report:\n" + out[-2000:])
    pct = j.get("percentiles_ms", {})
    r = {
        "rps": j["requests_per_second"],
        "requests": j["complete_requests"] - j["failed_requests"],
        "wrk_seconds": j["time_taken_s"],
        "p50_ms": pct.get("50"),
        "p99_ms": pct.get("99"),
        "socket_errors": j["failures"],
        "non_2xx_3xx": sum(v for k, v in j["status_codes"].items() if int(k) >= 400),
        "protocol": j.get("protocol"),
        "tls": j.get("tls"),
        "h2": j.get("h2"),
        "retried": j.get("retried"),
        "connections_opened": j.get("connections_opened"),
    }
    r["errors"] = j["failed_requests"] + r["non_2xx_3xx"]
    return r


def pb_command(pb, port, sc, duration):
    cmd = ["taskset", "-c", CLIENT_CPU, pb, "--json", "-q", "-W", "1", "-c", str(sc["conns"]),
           "--duration", f"{duration}s"]
    if not sc["close"]:
        cmd.append("-k")  # without -k each request carries Connection: close: a new connection each
    if sc.get("resume"):
        cmd.append("--tls-resume")
    if sc.get("h2"):
        cmd += ["--h2", "-m", str(sc.get("streams", 1))]
    cmd.append(url_for(port, sc))
    return cmd


def parse_ab_load(out, err, sc):
    """ab as the load generator (the posts' rows): its report in wrk's fields, plus Keep-Alive
    requests. Failed requests are errors, except ab's "Length" failures on a page whose length
    varies (phpinfo): ab compares every length with the first response's. An ab that gave up
    (socket timeout) counts every request it did not complete as an error."""
    r = parse_ab(out, err)
    wanted = int(sc["ab_args"][sc["ab_args"].index("-n") + 1])
    m = re.search(r"Failed requests:\s+\d+\s+\(Connect: (\d+), Receive: (\d+), Length: (\d+), "
                  r"Exceptions: (\d+)\)", out)
    connect, receive, length, exceptions = map(int, m.groups()) if m else (0, 0, r["failed"] or 0, 0)
    if sc["length"] is None:
        length = 0
    m = re.search(r"Time taken for tests:\s+([\d.]+) seconds", out)
    r["wrk_seconds"] = float(m.group(1)) if m else None
    pct = {int(pm.group(1)): float(pm.group(2)) for pm in re.finditer(r"^\s+(\d+)%\s+(\d+)", out, re.M)}
    r["p50_ms"] = pct.get(50)
    r["p99_ms"] = pct.get(99)
    failed = connect + receive + length + exceptions
    r["requests"] = r["complete"] - failed
    r["socket_errors"] = {"connect": connect, "receive": receive, "length": length,
                          "exceptions": exceptions, "not_completed": wanted - r["complete"]}
    r["non_2xx_3xx"] = r["non_2xx"]
    r["errors"] = failed + r["non_2xx"] + (wanted - r["complete"])
    if r["rps"] is None:
        last = [line for line in err.strip().splitlines() if line.strip()]
        r["problem"] = f"ab gave up: {last[-1] if last else '?'}"
    return r


def ab_command(port, sc, timeout):
    return ["taskset", "-c", CLIENT_CPU, "ab", *sc["ab_args"], "-s", str(timeout), url_for(port, sc)]


def client_for(sc, args):
    """The load generator of a scenario: its own choice, or the one --h2-client picks for h2."""
    if sc.get("h2") and getattr(args, "h2_client", None):
        return args.h2_client
    return sc.get("client", "wrk")


def load_command(server, sc, duration, args):
    kind = client_for(sc, args)
    if kind == "h2load":
        return h2load_command(server.port, sc, duration), parse_h2load
    if kind in ("pb", "peregrine-bench"):
        return pb_command(args.peregrine_bench, server.port, sc, duration), parse_pb
    if kind == "ab":
        return ab_command(server.port, sc, getattr(args, "ab_timeout", 30)), parse_ab_load
    return wrk_command(server.port, sc, duration), parse_wrk


def wrk_run(server, sc, duration, args=None):
    """One measured run of the scenario's load generator (wrk unless the scenario says otherwise).
    ab runs its fixed number of requests whatever `duration` says."""
    cmd, parse = load_command(server, sc, duration, args)
    if not server.alive():
        raise ServerError(f"{server.name} is no longer running\n" + server.diagnostics())
    cpu0 = measure.cpu_times()
    sample0 = server.cpu_sample()
    w0 = time.monotonic()
    rc, out, err = run_cmd(cmd, timeout=duration + 60)
    w1 = time.monotonic()
    sample1 = server.cpu_sample()
    cpu1 = measure.cpu_times()
    ab = parse is parse_ab_load
    if rc != 0 and not ab:
        raise BenchError(f"{os.path.basename(cmd[3])} failed (exit {rc}): {shlex.join(cmd)}\n{out}\n{err}")
    if not server.alive():
        raise ServerError(f"{server.name} died during: {shlex.join(cmd)}\n" + server.diagnostics())
    r = parse(out, err, sc) if ab else parse(out)
    if ab and r["rps"] is None:
        r["rps"] = r["requests"] / (w1 - w0)  # ab gave up before its report: what it did complete
    r["cmd"] = shlex.join(cmd)
    r.update(measure.per_request(sample0, sample1, r["requests"], w1 - w0, cpu0, cpu1))
    if err.strip():
        r["wrk_stderr"] = err.strip()[-2000:]
    return r


def parse_ab(out, err):
    def num(pattern, conv=int):
        m = re.search(pattern, out)
        return conv(m.group(1)) if m else None
    r = {
        "complete": num(r"Complete requests:\s+(\d+)"),
        "failed": num(r"Failed requests:\s+(\d+)"),
        "keep_alive": num(r"Keep-Alive requests:\s+(\d+)"),
        "non_2xx": num(r"Non-2xx responses:\s+(\d+)") or 0,
        "rps": num(r"Requests per second:\s+([\d.]+)", float),
    }
    if r["complete"] is None:
        # ab gave up (e.g. "apr_pollset_poll: The timeout specified has expired") before its report:
        # it only says how many requests it had completed by then.
        m = re.search(r"Total of (\d+) requests completed", out + err)
        r["complete"] = int(m.group(1)) if m else 0
    return r


def ab_run(server, sc, timeout):
    """One `ab -k` run (HTTP/1.0 keep-alive): did the server keep the connections alive?"""
    url = f"http://127.0.0.1:{server.port}{sc['path']}"
    cmd = ["taskset", "-c", CLIENT_CPU, "ab", "-k", "-n", str(AB_REQUESTS), "-c", str(AB_CONCURRENCY),
           "-s", str(timeout), url]
    if not shutil.which("ab"):
        return {"cmd": shlex.join(cmd), "complete": None, "failed": None, "keep_alive": None,
                "non_2xx": None, "rps": None, "problem": "ab not found (Debian package apache2-utils)"}
    t0 = time.monotonic()
    rc, out, err = run_cmd(cmd, timeout=timeout + 120)
    r = parse_ab(out, err)
    r["cmd"] = shlex.join(cmd)
    r["exit_status"] = rc
    r["wall_s"] = round(time.monotonic() - t0, 2)
    if rc != 0:
        last = [line for line in err.strip().splitlines() if line.strip()]
        r["problem"] = f"ab exit {rc}: {last[-1] if last else '?'}"
    if not server.alive():
        raise ServerError(f"{server.name} died during: {shlex.join(cmd)}\n" + server.diagnostics())
    return r


# --------------------------------------------------------------------------------------------
# idle10k client (runs as a separate process pinned to CPU 1: run.py --_idle-client ...)


def idle_client(port, count, path, length, window=256, timeout=180.0, tls=False):
    raise_nofile()
    sel = selectors.DefaultSelector()
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
    req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
           f"User-Agent: peregrine-bench-idle\r\n\r\n").encode()
    done = []
    stats = {"ok": 0, "connect_failed": 0, "bad_response": 0, "closed_early": 0, "conn_close_hdr": 0}
    started = inflight = 0
    t0 = time.monotonic()
    deadline = t0 + timeout

    def fail(st, what):
        nonlocal inflight
        stats[what] += 1
        inflight -= 1
        try:
            sel.unregister(st["sock"])
        except (KeyError, ValueError):
            pass
        st["sock"].close()

    while (started < count or inflight) and time.monotonic() < deadline:
        while inflight < window and started < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            started += 1
            e = s.connect_ex(("127.0.0.1", port))
            if e not in (0, errno.EINPROGRESS):
                stats["connect_failed"] += 1
                s.close()
                continue
            if ctx:
                s = ctx.wrap_socket(s, server_hostname="localhost", do_handshake_on_connect=False)
            inflight += 1
            sel.register(s, selectors.EVENT_WRITE, {"sock": s, "phase": "connect", "out": req,
                                                    "buf": bytearray()})
        for key, _ in sel.select(timeout=0.5):
            st = key.data
            s = st["sock"]
            try:
                if st["phase"] == "connect":
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        fail(st, "connect_failed")
                        continue
                    st["phase"] = "handshake" if ctx else "send"
                if st["phase"] == "handshake":
                    try:
                        s.do_handshake()
                    except ssl.SSLWantReadError:
                        sel.modify(s, selectors.EVENT_READ, st)
                        continue
                    except ssl.SSLWantWriteError:
                        sel.modify(s, selectors.EVENT_WRITE, st)
                        continue
                    st["phase"] = "send"
                    sel.modify(s, selectors.EVENT_WRITE, st)
                if st["phase"] == "send":
                    n = s.send(st["out"])
                    st["out"] = st["out"][n:]
                    if not st["out"]:
                        st["phase"] = "recv"
                        sel.modify(s, selectors.EVENT_READ, st)
                    continue
                data = s.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                continue
            except OSError:
                fail(st, "connect_failed" if st["phase"] != "recv" else "closed_early")
                continue
            if not data:
                fail(st, "closed_early")
                continue
            buf = st["buf"]
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = buf[:end].decode("latin-1").lower()
            clen = re.search(r"\r\ncontent-length:\s*(\d+)", head)
            if not head.startswith("http/1.1 200") or not clen or int(clen.group(1)) != length:
                fail(st, "bad_response")
                continue
            if len(buf) < end + 4 + int(clen.group(1)):
                continue
            if re.search(r"\r\nconnection:\s*close", head):
                stats["conn_close_hdr"] += 1
            sel.unregister(s)
            inflight -= 1
            done.append(s)
            stats["ok"] += 1
            st["buf"] = None
    stats["unfinished"] = inflight
    stats["open_seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(stats), flush=True)
    # Idle until the parent has measured, then report how many are still open, then close all.
    sys.stdin.readline()
    still = closed = 0
    for s in done:
        if ctx:
            s = socket.socket(fileno=os.dup(s.fileno()))  # peek at the TCP socket under TLS
        try:
            d = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            if d:
                still += 1  # unexpected data, but open
            else:
                closed += 1
        except BlockingIOError:
            still += 1
        except OSError:
            closed += 1
        finally:
            if ctx:
                s.close()
    print(json.dumps({"still_open": still, "closed_by_server": closed}), flush=True)
    for s in done:
        s.close()


def read_json_line(proc, timeout, _pending={}):
    """Read one JSON line from proc.stdout within timeout."""
    fd = proc.stdout.fileno()
    buf = _pending.pop(fd, b"")
    end = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = end - time.monotonic()
            if left <= 0:
                raise BenchError(f"idle client: no answer within {timeout}s (got {buf[:200]!r})")
            if sel.select(timeout=left):
                chunk = os.read(fd, 4096)
                if not chunk:
                    err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
                    raise BenchError(f"idle client exited without answering (got {buf[:200]!r})\n{err}")
                buf += chunk
    line, _, rest = buf.partition(b"\n")
    if rest:
        _pending[fd] = rest
    return json.loads(line)


def idle_run(server, sc):
    """One idle10k measurement on a freshly started server.  Returns a dict."""
    time.sleep(0.5)
    rss0, _ = server.rss_kb()
    procs0 = server.rss_breakdown()
    cmd = ["taskset", "-c", CLIENT_CPU, sys.executable, RUN_PY, "--_idle-client",
           "--_port", str(server.port), "--_count", str(sc["conns"]), "--_path", sc["path"],
           "--_length", str(sc["length"])] + (["--_tls"] if sc.get("tls") else [])
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=die_with_parent)
    try:
        stats = read_json_line(p, 180)
        time.sleep(1.0)
        rss1, _ = server.rss_kb()
        procs1 = server.rss_breakdown()
        ns0, _, _ = server.cpu_sample()
        time.sleep(1.0)
        ns1, _, _ = server.cpu_sample()
        p.stdin.write(b"check\n")
        p.stdin.flush()
        check = read_json_line(p, 60)
        p.stdin.close()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        err = p.stderr.read().decode(errors="replace").strip()
    finally:
        if p.poll() is None:
            kill_group(p.pid)
        p.wait()
    if not server.alive():
        raise ServerError(f"{server.name} died during idle10k\n" + server.diagnostics())
    r = dict(stats)
    r.update(check)
    r["cmd"] = shlex.join(cmd)
    r["rss_before_kb"] = rss0
    r["rss_after_kb"] = rss1
    r["processes_before"] = procs0
    r["processes_after"] = procs1
    r["rss_delta_mb"] = (rss1 - rss0) / 1024
    r["kb_per_conn"] = (rss1 - rss0) / stats["ok"] if stats["ok"] else None
    r["idle_cpu_ms_per_s"] = (ns1 - ns0) / 1e6
    r["errors"] = (stats["connect_failed"] + stats["bad_response"] + stats["closed_early"]
                   + stats["unfinished"] + check["closed_by_server"])
    if err:
        r["client_stderr"] = err[-2000:]
    return r
