"""Child processes: starting them pinned and in their own group, killing whole groups, the
watchdog that outlives a killed run, and the little HTTP client used for start-up checks."""

import ctypes
import os
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time

from .common import RUN_PY, BenchError


_libc = None


def die_with_parent():
    """preexec_fn for every child: die with us (best effort) even if we are SIGKILLed."""
    try:
        global _libc
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


class Reaper:
    """A watchdog process that SIGKILLs the registered server process groups if this script
    dies without cleaning up (even by SIGKILL: it notices EOF on its stdin pipe).  PDEATHSIG
    alone is not enough: nginx workers are forked by the master and would be orphaned."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, RUN_PY, "--_reaper"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     start_new_session=True)

    def _send(self, line):
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def add(self, pgid):
        self._send(f"+{pgid}")

    def remove(self, pgid):
        self._send(f"-{pgid}")

    def close(self):
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# The running Reaper, once main() started one; servers and back ends register their groups.
REAPER = None


def watch(pgid):
    """Have the reaper kill this process group should the run die before stopping it."""
    if REAPER:
        REAPER.add(pgid)


def unwatch(pgid):
    if REAPER:
        REAPER.remove(pgid)


def reap(proc):
    """Waits for a child whose group kill_group() ended (SIGKILL if it lingers) and takes its
    group off the reaper's list."""
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    unwatch(proc.pid)


def reaper_main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    groups = set()
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("+"):
            groups.add(int(line[1:]))
        elif line.startswith("-"):
            groups.discard(int(line[1:]))
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (max(hard, 65536), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            break
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def read_file(path, default=None):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return default


def proc_stat(pid):
    """Returns (ppid, pgrp, utime+stime ticks) or None."""
    s = read_file(f"/proc/{pid}/stat")
    if not s:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = s[s.rfind(")") + 2:].split()
    # rest[0] is field 3 (state); field N is rest[N-3].
    return int(rest[1]), int(rest[2]), int(rest[11]) + int(rest[12])


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def tail(path, n=40):
    text = read_file(path, "")
    lines = text.splitlines()
    return "\n".join(lines[-n:])


def run_cmd(cmd, timeout, **kw):
    """subprocess.run with a timeout, in its own process group that is killed on timeout."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=die_with_parent, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p.pid)
        p.communicate()
        raise BenchError(f"timed out after {timeout}s: {shlex.join(cmd)}")
    finally:
        if p.poll() is None:
            kill_group(p.pid)
            p.wait()
    return p.returncode, out, err


def group_members(pgid):
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st and st[1] == pgid:
            out.append(pid)
    return out


def kill_group(pgid, grace=3.0):
    """SIGTERM the process group, wait up to `grace` s, then SIGKILL whatever is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        end = time.monotonic() + wait
        while time.monotonic() < end:
            # reap our own child if it is one, so it does not stay a zombie in the group
            try:
                os.waitpid(-pgid, os.WNOHANG)
            except ChildProcessError:
                pass
            alive = [p for p in group_members(pgid)
                     if (read_file(f"/proc/{p}/stat", "") or "").split(") ")[-1][:1] not in ("Z", "")]
            if not alive:
                return
            time.sleep(0.05)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=5.0, headers=None, one_response=False):
    """Minimal HTTP/1.1 GET on a fresh connection; returns (status, headers dict, body).
    one_response: stop at the end of the first response's Content-Length instead of waiting for
    the server to close (canned-epoll never does)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        hdrs = {"Host": f"127.0.0.1:{port}", "Connection": "close"}
        hdrs.update(headers or {})
        req = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        s.sendall(req.encode())
        data = bytearray()
        while not (one_response and response_complete(data)):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return parse_response(bytes(data), path)


def response_complete(data):
    """Whether `data` holds a whole response head and the Content-Length bytes it announces."""
    head, sep, body = bytes(data).partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value.strip())
    return False


def parse_response(data, path):
    """(status, headers dict with lower-case names, de-chunked body) of one whole response."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise BenchError(f"malformed response to GET {path}: {data[:200]!r}")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    h = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        h[k.strip().lower()] = v.strip()
    if "chunked" in h.get("transfer-encoding", "").lower():
        body = dechunk(body)
    return status, h, body


def dechunk(body):
    out = bytearray()
    while body:
        line, _, body = body.partition(b"\r\n")
        n = int(line.split(b";")[0], 16)
        if n == 0:
            break
        out += body[:n]
        body = body[n + 2:]
    return bytes(out)
