"""System calls per request (issue 19: "strace -c -f for each backend"), counted in a pass of its own.

After a scenario's measured runs, with its servers still up, each server gets one more load run of
--syscalls-seconds while a counter is attached to all its processes and threads; the calls counted
over the requests wrk completed in that run are the figure. The pass is apart from the measured runs
because tracing changes the timing:

  * strace (-c -f) stops the server at every system call. The server runs several times slower,
    so it finds more work per wake-up: its epoll_wait or io_uring_enter calls per request come out
    lower than without strace (small, 100 connections: Peregrine's epoll_wait 0.011 per request
    under strace, 0.03 to 0.05 under perf). And it serves few requests in the pass, so the set-up calls of
    wrk's connections (accept4, epoll_ctl: one each per connection) and the calls of the requests
    in flight when wrk stops (up to one per connection; wrk counts only answered ones) weigh more
    per request. The
    issue names strace; its counts of the calls made per request (recv, send) are exact.
  * perf stat on the syscalls:sys_enter_* tracepoints counts in the kernel without stopping the
    server: the wake-up calls per request are those of the real speed.

Calls submitted through an io_uring ring are not system calls: they are counted neither way, which
is the point of the backend; io_uring_enter is.
"""

import os
import shlex
import signal
import subprocess
import time

from .common import CLIENT_CPU, SERVER_CPU, BenchError
from .procs import die_with_parent, kill_group, read_file

TOOLS = ("strace", "perf")
TOP = 5  # the calls named in the report, most frequent first


def strace_command(pids, out_path):
    # -f: every thread of each process (and any child it forks); -S calls: most frequent first.
    # On the server's CPU: each traced call stops the server and wakes strace, and a wake-up on
    # the other CPU (busy with wrk) cost 20x the requests here (c1000: 1,600 in 3 s against 35,000).
    cmd = ["taskset", "-c", SERVER_CPU, "strace", "-c", "-f", "-S", "calls", "-o", out_path]
    for pid in pids:
        cmd += ["-p", str(pid)]
    return cmd


def perf_command(pids, out_path):
    return ["taskset", "-c", CLIENT_CPU, "perf", "stat", "-x,", "-o", out_path, "-e", "syscalls:sys_enter_*",
            "-p", ",".join(str(p) for p in pids)]


def parse_strace(text):
    """{syscall: calls} from `strace -c`'s table (its `total` row is left out: the sum is ours)."""
    counts = {}
    for line in text.splitlines():
        f = line.split()
        # % time, seconds, usecs/call, calls, [errors,] name
        if len(f) in (5, 6) and f[-1] != "total" and f[3].isdigit():
            try:
                float(f[0])
            except ValueError:
                continue
            counts[f[-1]] = counts.get(f[-1], 0) + int(f[3])
    if not counts and "% time" not in text:
        raise BenchError("no strace -c table in its output:\n" + text[-2000:])
    return counts


def parse_perf(text):
    """{syscall: calls} from `perf stat -x,` on the syscalls:sys_enter_* tracepoints."""
    counts = {}
    seen = False
    for line in text.splitlines():
        f = line.split(",")
        if len(f) < 3 or not f[2].startswith("syscalls:sys_enter_"):
            continue
        seen = True
        if f[0].isdigit() and int(f[0]):
            name = f[2][len("syscalls:sys_enter_"):]
            counts[name] = counts.get(name, 0) + int(f[0])
    if not seen:
        raise BenchError("no syscalls:sys_enter_* counts in perf stat's output:\n" + text[-2000:])
    return counts


def summarize(counts, requests, top=TOP):
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    per = (lambda n: n / requests) if requests else (lambda n: None)
    return {"requests": requests, "calls": total, "per_request": per(total),
            "top": [[name, n, per(n)] for name, n in ranked[:top]], "counts": dict(ranked)}


def traced(pids, tracer_pid):
    """Whether strace has attached to every thread of every process."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            status = read_file(f"/proc/{pid}/task/{tid}/status", "") or ""
            line = next((x for x in status.splitlines() if x.startswith("TracerPid:")), "TracerPid:\t0")
            if int(line.split()[1]) != tracer_pid:
                return False
    return True


def perf_event_fds(pid):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    n = 0
    for fd in fds:
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]"
        except OSError:
            pass
    return n


def wait_attached(tool, proc, pids, timeout=15.0):
    """Until the counter counts: strace has every thread (TracerPid), perf's events stopped opening."""
    end = time.monotonic() + timeout
    last, steady = -1, 0
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        if tool == "strace":
            if traced(pids, proc.pid):
                return True
        else:
            n = perf_event_fds(proc.pid)
            steady = steady + 1 if n == last and n > 0 else 0
            last = n
            if steady >= 3:
                return True
        time.sleep(0.1)
    return False


def count_pass(server, sc, seconds, tool, args, workdir, load):
    """One load run of `seconds` on `server` with `tool` counting its system calls. `load` is
    load.wrk_run (passed in: the measured runs' own load, and no import cycle)."""
    pids = server.pids()
    out_path = os.path.join(workdir, f"{server.name}-{tool}.txt")
    cmd = (strace_command if tool == "strace" else perf_command)(pids, out_path)
    err_path = out_path + ".stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True, preexec_fn=die_with_parent)
    try:
        if not wait_attached(tool, proc, pids):
            raise BenchError(f"{tool} did not attach to {server.name} (pids {pids}): {shlex.join(cmd)}\n"
                             + (read_file(err_path, "") or "")[-1000:])
        r = load(server, sc, seconds, args)
        os.kill(proc.pid, signal.SIGINT)  # both write their summary on SIGINT and detach
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{tool} did not stop within 30 s of SIGINT: {shlex.join(cmd)}")
    finally:
        if proc.poll() is None:
            kill_group(proc.pid)
            proc.wait()
    text = read_file(out_path, "") or ""
    counts = (parse_strace if tool == "strace" else parse_perf)(text + "\n" + (read_file(err_path, "") or ""))
    s = summarize(counts, r["requests"])
    s.update(tool=tool, cmd=shlex.join(cmd), load_cmd=r["cmd"], seconds=seconds, rps=r["rps"],
             errors=r["errors"])
    return s
