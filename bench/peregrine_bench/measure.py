"""What is measured from /proc: a server's processes, their CPU time and wake-ups, their RSS.

CPU time comes from /proc/PID/task/TID/schedstat (ns on CPU, summed over every thread of every
process of the server) because the utime+stime of /proc/PID/stat moves in 10 ms ticks, too coarse
for a few seconds of load; the ticks are kept alongside as a cross-check."""

import os
import re

from .common import CLIENT_CPU, CLK_TCK, SERVER_CPU
from .procs import all_pids, proc_stat, read_file


def tree_members(root, table):
    """The pids of `root`'s process group plus every descendant that left it (setsid()).

    table: pid -> (ppid, pgrp, ...) for every process on the machine."""
    members = {p for p, st in table.items() if st[1] == root}
    if root in table:
        members.add(root)
    changed = True
    while changed:
        changed = False
        for p, st in table.items():
            if p not in members and st[0] in members:
                members.add(p)
                changed = True
    return sorted(members)


def process_tree(root):
    """All processes of the server started as `root` (nginx's master and worker, h2o's helper)."""
    table = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st:
            table[pid] = st
    return tree_members(root, table)


def cpu_sample(pids):
    """(schedstat ns summed over all threads of all processes, stat ticks summed, times a
    thread was put on the CPU summed: mostly wake-ups, each costly on a VM)."""
    ns = 0
    ticks = 0
    slices = 0
    for pid in pids:
        st = proc_stat(pid)
        if st:
            ticks += st[2]
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            s = read_file(f"/proc/{pid}/task/{tid}/schedstat")
            if s:
                fields = s.split()
                ns += int(fields[0])
                slices += int(fields[2])
    return ns, ticks, slices


def rss_kb(pids):
    """(sum VmRSS, sum VmHWM) in kB over the processes."""
    rss = hwm = 0
    for pid in pids:
        s = read_file(f"/proc/{pid}/status", "")
        for line in s.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm += int(line.split()[1])
    return rss, hwm


def rss_breakdown(pids):
    """[(pid, comm, VmRSS kB)] for the JSON: shows what the total is made of (e.g. nginx's
    master, h2o's annotate-backtrace-symbols perl helper)."""
    out = []
    for pid in pids:
        comm = (read_file(f"/proc/{pid}/comm", "?") or "?").strip()
        rss = 0
        for line in (read_file(f"/proc/{pid}/status", "") or "").splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        out.append((pid, comm, rss))
    return out


def cpu_times():
    """Per-CPU (busy, total) jiffies from /proc/stat."""
    out = {}
    for line in read_file("/proc/stat", "").splitlines():
        if re.match(r"cpu\d+ ", line):
            f = line.split()
            vals = list(map(int, f[1:]))
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            total = sum(vals[:8])
            out[f[0]] = (total - idle, total)
    return out


def cpu_busy(before, after, cpu):
    b0, t0 = before.get(cpu, (0, 0))
    b1, t1 = after.get(cpu, (0, 0))
    return (b1 - b0) / (t1 - t0) if t1 > t0 else None


def per_request(sample0, sample1, requests, wall_s, cpus0, cpus1):
    """The figures of one run from the samples taken around it: the server's CPU per request
    (schedstat and ticks), its wake-ups per request, how busy it and both CPUs were."""
    ns0, t0, s0 = sample0
    ns1, t1, s1 = sample1
    n = requests
    return {
        "wall_s": wall_s,
        "cpu_ns": ns1 - ns0,
        "cpu_ticks": t1 - t0,
        "cpu_us_per_req": (ns1 - ns0) / 1e3 / n if n else None,
        "cpu_us_per_req_ticks": (t1 - t0) * 1e6 / CLK_TCK / n if n else None,
        "runs_per_req": (s1 - s0) / n if n else None,
        "server_cpu_util": (ns1 - ns0) / 1e9 / wall_s,
        "cpu0_busy": cpu_busy(cpus0, cpus1, "cpu" + SERVER_CPU),
        "cpu1_busy": cpu_busy(cpus0, cpus1, "cpu" + CLIENT_CPU),
    }
