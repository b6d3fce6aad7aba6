"""The command line and the run: which servers, which scenarios, in what order, and the JSON."""

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import sys
import tempfile
import time

from . import procs
from .backends import PhpFpm, backend_available, start_backend
from .common import (CLIENT_CPU, CLK_TCK, REPO_DIR, SERVER_CPU, BackendError, BenchError, ServerError,
                     labelled_binaries, log, warn)
from . import syscalls
from .load import ab_run, client_for, idle_client, idle_run, wrk_run
from .procs import raise_nofile, read_file, reaper_main, run_cmd
from .report import (across_rounds, fmt, median, name_width, print_across_rounds, print_idle_table,
                     print_load_table, ratio_fields, summarize_load)
from .scenarios import SCENARIO_ALIASES, SCENARIO_ORDER, SCENARIOS, check_paths_for, make_docroot
from .tls import make_certificate
from .servers import ALL_SERVERS, DEFAULT_PEREGRINE, KNOWN_SERVERS, SERVER_CLASSES, Peregrine, peregrine_variant


def error_kinds(r):
    """Which errors a run's count is made of ("read 81, non-2xx 0"), for the run's line: a count
    alone, seen once and not again, says nothing about where to look."""
    kinds = [f"{k} {v}" for k, v in (r.get("socket_errors") or {}).items() if v]
    return ", ".join(kinds + [f"non-2xx {r.get('non_2xx_3xx') or 0}"])


def start_servers(names, scen_dir, docroot, nofile, args, check_paths, scenario=None, backend=None):
    servers = []
    try:
        for n in names:
            s = args._server_classes[n](os.path.join(scen_dir, n), docroot, nofile)
            s.scenario = scenario
            s.backend = backend
            s.tls = args._tls
            servers.append(s)
            s.start(args, check_paths)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers


def stop_all(ctx):
    """Stops the servers, then the back end (so servers do not log back-end errors meanwhile)."""
    for s in ctx["running"]:
        s.stop()
    ctx["running"] = []


def tools_available(name, args):
    """(ok, reason): the load generator and the certificate a scenario needs."""
    sc = SCENARIOS[name]
    if sc.get("tls") and not args._tls:
        return False, f"no TLS certificate ({args._tls_error})"
    if sc.get("idle"):
        return True, ""
    kind = client_for(sc, args)
    if kind == "h2load" and not shutil.which("h2load"):
        return False, "h2load not found (Debian package nghttp2-client)"
    if kind in ("pb", "peregrine-bench") and not os.access(args.peregrine_bench, os.X_OK):
        return False, f"peregrine-bench not found at {args.peregrine_bench} (build it, or --peregrine-bench PATH)"
    return True, ""


def run_load_scenario(name, names, ctx, args):
    sc = SCENARIOS[name]
    result = {"description": sc["desc"], "scenario": name, "servers": {}}
    active = []
    result["loadavg"] = " ".join((read_file("/proc/loadavg", "") or "").split()[:3])
    ok, why = backend_available(name)
    if ok:
        ok, why = tools_available(name, args)
    for n in names:
        # A server that cannot run the scenario skips only itself (canned-epoll skipped the
        # servers after it when this reused `ok`).
        ok_n, why_n = args._server_classes[n].supports(name) if ok else (ok, why)
        if ok_n:
            active.append(n)
        else:
            result["servers"][n] = {"skipped": why_n}
    if not active:
        return result
    nw = name_width(names, 9)
    scen_dir = os.path.join(ctx["tmp"], name)
    backend = start_backend(name, os.path.join(scen_dir, "backend"), ctx, active)
    if backend:
        ctx["running"].append(backend)
        result["backend"] = {"name": backend.name, "cmdline": shlex.join(backend.cmd)}
    # One server that cannot start (Peregrine built without a feature the scenario needs, a
    # config key renamed) is reported, and the others are still measured.
    servers = []
    try:
        for n in active:
            try:
                servers += start_servers([n], scen_dir, ctx["docroot"], ctx["nofile"], args,
                                         check_paths_for([name]), scenario=name, backend=backend)
            except ServerError as e:
                result["servers"][n] = {"error": str(e)}
                result.setdefault("server_errors", []).append(n)
                log(f"\n*** SERVER FAILURE in scenario {name} ({n}):\n{e}")
    except BaseException:
        for s in servers:
            s.stop()
        stop_all(ctx)
        raise
    if not servers:
        stop_all(ctx)
        return result
    ctx["running"] = servers + ctx["running"]
    try:
        for s in servers:
            result["servers"][s.name] = {"runs": [], "cmdline": shlex.join(s.cmd), "port": s.port,
                                         "body_bytes": s.body_sizes.get(sc["path"])}
            if s.tls_info:
                result["servers"][s.name]["tls_info"] = s.tls_info
        if args.warmup > 0:
            for s in servers:
                w = wrk_run(s, sc, args.warmup, args)
                result["servers"][s.name]["warmup"] = w
                log(f"   [{name}] {s.name:<{nw}} warm-up  {w['rps']:10.0f} req/s")
        for i in range(args.runs):
            k = i % len(servers)
            for s in servers[k:] + servers[:k]:  # rotate the order between runs
                r = wrk_run(s, sc, args.duration, args)
                result["servers"][s.name]["runs"].append(r)
                extra = ""
                if r.get("tls"):
                    extra += f"  TLS handshakes {r['tls']['handshakes']} ({r['tls']['resumed']} resumed)"
                if r.get("protocol"):
                    extra += f"  {r['protocol']}"
                if r.get("keep_alive") is not None:
                    extra += f"  p50 {fmt(r['p50_ms'], '.0f')} ms  keep-alive {r['keep_alive']}/{r['complete']}"
                if r["errors"]:
                    extra += "  (" + error_kinds(r) + ")"
                log(f"   [{name}] {s.name:<{nw}} run {i + 1}/{args.runs} {r['rps']:10.0f} req/s "
                    f"{fmt(r['cpu_us_per_req'], '7.2f')} us/req (ticks: {fmt(r['cpu_us_per_req_ticks'], '.2f')}) "
                    f"p99 {fmt(r['p99_ms'], '.2f')} ms  errors {r['errors']}  "
                    f"srv CPU {100 * r['server_cpu_util']:.0f}%  cpu0 busy {fmt(r['cpu0_busy'] and 100 * r['cpu0_busy'], '.0f')}%"
                    + extra)
        for s in servers:
            result["servers"][s.name]["rss_kb_after"] = s.rss_kb()
            result["servers"][s.name]["processes"] = s.rss_breakdown()
        if sc.get("ab"):
            for s in servers:
                a = ab_run(s, sc, args.ab_timeout)
                result["servers"][s.name]["ab"] = a
                log(f"   [{name}] {s.name:<{nw}} ab -k: {fmt(a['complete'], 'd')} complete, "
                    f"{fmt(a['keep_alive'], 'd')} keep-alive, {fmt(a['failed'], 'd')} failed, "
                    f"{fmt(a['non_2xx'], 'd')} non-2xx, {fmt(a['rps'], '.0f')} req/s"
                    + (f"  ({a['problem']})" if a.get("problem") else ""))
        for tool in args.syscalls:
            for s in servers:
                result["servers"][s.name].setdefault("syscalls", {})[tool] = count_syscalls(
                    s, sc, tool, args, scen_dir, f"[{name}] {s.name:<{nw}}")
    finally:
        stop_all(ctx)
    summ = {}
    for n, e in result["servers"].items():
        if "runs" in e:
            e["summary"] = summ[n] = summarize_load(e)
    ratio_fields(summ, names)
    return result


def count_syscalls(server, sc, tool, args, workdir, label):
    """The system-call pass of one server (syscalls.py); a tool that cannot attach is reported in
    the table, and the run goes on."""
    try:
        c = syscalls.count_pass(server, sc, args.syscalls_seconds, tool, args, workdir, wrk_run)
    except BenchError as e:
        if isinstance(e, ServerError):
            raise
        log(f"   {label} {tool}: FAILED: {e}")
        return {"error": str(e)}
    top = ", ".join(f"{n} {fmt(per, '.3f')}" for n, _, per in c["top"])
    log(f"   {label} {tool}: {fmt(c['per_request'], '.2f')} system calls per request over "
        f"{c['requests']} requests ({top})")
    return c


def run_idle_scenario(name, names, ctx, args):
    sc = SCENARIOS[name]
    result = {"description": sc["desc"], "servers": {}}
    nw = name_width(names, 9)
    ok, why = tools_available(name, args)
    for n in names:
        if ok:
            ok_n, why_n = args._server_classes[n].supports(name)
        else:
            ok_n, why_n = ok, why
        if not ok_n:
            result["servers"][n] = {"skipped": why_n}
            continue
        runs = []
        entry = {"runs": runs}
        result["servers"][n] = entry
        for i in range(args.runs):
            try:
                servers = start_servers([n], os.path.join(ctx["tmp"], name, f"{n}-{i + 1}"), ctx["docroot"],
                                        ctx["nofile"], args, check_paths_for([name]), scenario=name)
            except ServerError as e:
                result["servers"][n] = entry = {"error": str(e)}
                result.setdefault("server_errors", []).append(n)
                log(f"\n*** SERVER FAILURE in scenario {name} ({n}):\n{e}")
                break
            ctx["running"] = servers
            try:
                r = idle_run(servers[0], sc)
            finally:
                servers[0].stop()
                ctx["running"] = []
            runs.append(r)
            log(f"   [{name}] {n:<{nw}} run {i + 1}/{args.runs} RSS {r['rss_before_kb'] / 1024:.1f} -> "
                f"{r['rss_after_kb'] / 1024:.1f} MB (+{r['rss_delta_mb']:.1f} MB, "
                f"{fmt(r['kb_per_conn'], '.2f')} KB/conn), {r['ok']} ok, errors {r['errors']}, "
                f"opened in {r['open_seconds']:.2f}s, still open {r['still_open']}")
        if "error" in entry:
            continue
        entry["summary"] = {
            "rss_before_mb": median([r["rss_before_kb"] / 1024 for r in runs]),
            "rss_after_mb": median([r["rss_after_kb"] / 1024 for r in runs]),
            "rss_delta_mb": median([r["rss_delta_mb"] for r in runs]),
            "kb_per_conn": median([r["kb_per_conn"] for r in runs]),
            "ok": median([r["ok"] for r in runs]),
            "errors": sum(r["errors"] for r in runs),
            "open_seconds": median([r["open_seconds"] for r in runs]),
            "idle_cpu_ms_per_s": median([r["idle_cpu_ms_per_s"] for r in runs]),
        }
    return result


def machine_info():
    cpu = "?"
    for line in (read_file("/proc/cpuinfo", "") or "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "kernel": platform.release(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "loadavg_start": (read_file("/proc/loadavg", "") or "").strip(),
        "python": platform.python_version(),
        "clk_tck": CLK_TCK,
    }


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Benchmark Peregrine against nginx, H2O and lighttpd "
                                             "(prints figures; not a pass/fail test).")
    ap.add_argument("--runs", type=int, default=3, help="measured runs per scenario and server (default 3)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per measured run (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per scenario and server (default 2)")
    ap.add_argument("--servers", default=",".join(ALL_SERVERS),
                    help=f"comma-separated subset of {','.join(KNOWN_SERVERS)} (default {','.join(ALL_SERVERS)}; "
                         "peregrine-quick: the same binary in quick mode, from command-line flags)")
    ap.add_argument("--scenarios", default=",".join(SCENARIO_ORDER),
                    help=f"comma-separated subset of {','.join(SCENARIO_ORDER)}; "
                         f"proxy_slow = {','.join(SCENARIO_ALIASES['proxy_slow'])}")
    ap.add_argument("--peregrine", default=DEFAULT_PEREGRINE, help=f"peregrine binary (default {DEFAULT_PEREGRINE})")
    ap.add_argument("--peregrine-binary", action="append", default=[], metavar="LABEL=PATH",
                    help="repeatable: benchmark this binary as server peregrine-LABEL, in the place of "
                         "peregrine in --servers, or else of peregrine-uring (then on io_uring); two "
                         "builds side by side in one run, the first the baseline of the comparison table")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every scenario this many times, servers started afresh each round, and "
                         "print the median of the rounds' medians (default 1)")
    ap.add_argument("--tolerance", type=float, default=3.0, metavar="PERCENT",
                    help="comparison table: a binary whose CPU per request exceeds the baseline's by "
                         "more than this is marked SLOWER (default 3)")
    ap.add_argument("--json", metavar="FILE", help="write all results (every run) as JSON to FILE")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (configs, logs) for inspection")
    ap.add_argument("--peregrine-bench", default=os.path.join(REPO_DIR, "build", "release", "peregrine-bench"),
                    help="peregrine-bench binary, the load generator of tls_handshake and tls_resume "
                         "(default: this tree's build/release/peregrine-bench)")
    ap.add_argument("--h2-client", choices=("h2load", "peregrine-bench"),
                    help="load generator of the h2_* scenarios (default: h2load, as in the issue)")
    ap.add_argument("--canned-epoll", default=os.path.join(REPO_DIR, "build", "release", "canned-epoll"),
                    help="canned-epoll binary (bench/canned_epoll.cc), server canned-epoll (default: this "
                         "tree's build/release/canned-epoll, built if missing and the tree is configured)")
    ap.add_argument("--syscalls", nargs="?", const="strace", default="", metavar="TOOLS",
                    help="after each scenario's measured runs, one more load run per server counting its "
                         "system calls per request: strace (strace -c -f, the default), perf (perf stat on "
                         "the syscalls:sys_enter_* tracepoints) or strace,perf")
    ap.add_argument("--syscalls-seconds", type=int, default=3,
                    help="length of each --syscalls load run (default 3)")
    ap.add_argument("--ab-timeout", type=int, default=30,
                    help="ab -s: seconds ab waits on a socket in the php_hello keep-alive check (default 30)")
    # internal: the idle10k client
    ap.add_argument("--_idle-client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_reaper", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_count", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_path", help=argparse.SUPPRESS)
    ap.add_argument("--_length", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_tls", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._idle_client or args._reaper:
        return args
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    args.scenarios = [x for s in args.scenarios.split(",") if s.strip()
                      for x in SCENARIO_ALIASES.get(s.strip(), [s.strip()])]
    for s in args.servers:
        if s not in SERVER_CLASSES:
            ap.error(f"unknown server {s!r} (known: {', '.join(KNOWN_SERVERS)})")
    for s in args.scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s!r} (known: {', '.join(SCENARIO_ORDER + list(SCENARIO_ALIASES))})")
    if (args.runs < 1 or args.duration < 1 or args.warmup < 0 or args.ab_timeout < 1 or args.rounds < 1
            or args.syscalls_seconds < 1):
        ap.error("--runs, --rounds, --duration, --syscalls-seconds and --ab-timeout must be >= 1, --warmup >= 0")
    args.syscalls = [t.strip() for t in args.syscalls.split(",") if t.strip()]
    for t in args.syscalls:
        if t not in syscalls.TOOLS:
            ap.error(f"--syscalls {t!r}: want {' or '.join(syscalls.TOOLS)} (or both, comma-separated)")
    args.peregrine = os.path.abspath(args.peregrine)
    args.canned_epoll = os.path.abspath(args.canned_epoll)
    # keep the canonical orders
    args.servers = [s for s in KNOWN_SERVERS if s in args.servers]
    args.scenarios = [s for s in SCENARIO_ORDER if s in args.scenarios]
    # Internal (kept out of the JSON): the class of each server name; two labelled peregrine
    # binaries take the single peregrine's place.
    args._server_classes = dict(SERVER_CLASSES)
    if args.peregrine_binary:
        # The labelled builds take the place of peregrine, or else of peregrine-uring (and run
        # on io_uring).
        base = next((b for b in ("peregrine", "peregrine-uring") if b in args.servers), None)
        if not base:
            ap.error("--peregrine-binary needs peregrine or peregrine-uring in --servers")
        variants = {}
        for label, path in labelled_binaries(args.peregrine_binary, ap.error):
            cls = peregrine_variant(label, path, SERVER_CLASSES[base])
            variants[cls.name] = cls
        args._server_classes.update(variants)
        i = args.servers.index(base)
        args.servers[i:i + 1] = list(variants)
    return args


def run_round(names, ctx, args, scenarios):
    """Every scenario once, its table printed as it ends; returns the exit status so far."""
    rc = 0
    for name in args.scenarios:
        log("")
        log(f"--- scenario {name}: {SCENARIOS[name]['desc']}")
        try:
            if SCENARIOS[name].get("idle"):
                res = run_idle_scenario(name, names, ctx, args)
            else:
                res = run_load_scenario(name, names, ctx, args)
        except (ServerError, BackendError) as e:
            # Recorded, and the exit status will be 1, but the other scenarios still run.
            what = "BACK-END" if isinstance(e, BackendError) else "SERVER"
            log(f"\n*** {what} FAILURE in scenario {name}:\n{e}")
            scenarios[name] = {"error": str(e)}
            rc = 1
            continue
        scenarios[name] = res
        if res.get("server_errors"):
            rc = 1
        (print_idle_table if SCENARIOS[name].get("idle") else print_load_table)(name, SCENARIOS[name], res,
                                                                                 names, args)
    return rc


def _on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv):
    args = parse_args(argv)
    if args._idle_client:
        idle_client(args._port, args._count, args._path, args._length, tls=args._tls)
        return 0
    if args._reaper:
        reaper_main()
        return 0

    for tool in ("wrk", "taskset") + tuple(args.syscalls):
        if not shutil.which(tool):
            log(f"error: {tool} not found in PATH" + (" (--syscalls)" if tool in args.syscalls else ""))
            return 2
    if (os.cpu_count() or 1) < 2:
        warn("fewer than 2 CPUs: server and client will share a CPU")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    nofile = raise_nofile()

    names = []
    skipped = {}
    versions = {}
    for n in args.servers:
        ok, why = args._server_classes[n].available(args)
        if ok:
            names.append(n)
            try:
                versions[n] = args._server_classes[n].version(args)
            except (BenchError, OSError) as e:
                versions[n] = f"? ({e})"
        else:
            skipped[n] = why
            log(f"*** {n}: SKIPPED - {why}")
    if not names:
        log("error: no server to benchmark")
        return 2
    if any(SCENARIOS[n].get("backend") == "php" for n in args.scenarios) and PhpFpm.available()[0]:
        try:
            versions["php-fpm (back end)"] = PhpFpm.version()
        except (BenchError, OSError) as e:
            versions["php-fpm (back end)"] = f"? ({e})"

    procs.REAPER = procs.Reaper()
    tmp = tempfile.mkdtemp(prefix="peregrine-bench-")
    os.chmod(tmp, 0o755)  # servers that drop privileges must still read the docroot
    docroot = os.path.join(tmp, "www")
    make_docroot(docroot)
    args._tls, args._tls_error = None, ""
    if any(SCENARIOS[n].get("tls") for n in args.scenarios):
        try:
            args._tls = make_certificate(os.path.join(tmp, "tls"))
            log(f"TLS: ECDSA P-256 self-signed certificate {args._tls[0]}")
        except BenchError as e:
            args._tls_error = str(e)
            warn(f"TLS scenarios skipped: {e}")
    ctx = {"tmp": tmp, "docroot": docroot, "nofile": nofile, "running": []}
    results = {
        "tool": "bench/run.py",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
        "machine": machine_info(),
        "versions": versions,
        "skipped_servers": skipped,
        "method": {
            "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU,
            "cpu_per_request": "sum over all threads of all server processes of /proc/PID/task/TID/schedstat "
                               "field 1 (ns on CPU), delta across the wrk run, / requests completed; "
                               "cpu_us_per_req_ticks is the same from /proc/PID/stat utime+stime (CLK_TCK)",
            "runs_per_req": "schedstat field 3 (times a thread was put on a CPU: wake-ups and "
                            "preemptions) summed the same way, / requests completed",
            "rss": "sum of VmRSS over the server's processes",
            "nofile_limit": nofile,
        },
        "scenarios": {},
    }
    log(f"peregrine bench: servers {', '.join(names)}; scenarios {', '.join(args.scenarios)}; "
        f"{args.runs} run(s) x {args.duration}s, warm-up {args.warmup}s")
    log("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    peregrines = [n for n in names if issubclass(args._server_classes[n], Peregrine)]
    if peregrines:
        git = ""
        try:
            rc_, out, _ = run_cmd(["git", "-C", REPO_DIR, "rev-parse", "--short", "HEAD"], 10)
            rc2, dirty, _ = run_cmd(["git", "-C", REPO_DIR, "status", "--porcelain",
                                     "--untracked-files=no"], 10)
            if rc_ == 0:
                git = out.strip() + ("+dirty" if dirty.strip() else "")
        except (BenchError, OSError):
            pass
        for n in peregrines:
            fp = Peregrine.fingerprint(args._server_classes[n].binary_path(args))
            if n == "peregrine":
                results["peregrine_binary"] = dict(fp, git=git)
            else:
                # A labelled binary need not come from this tree: no git state for it.
                results.setdefault("peregrine_binaries_compared", {})[n] = fp
            log(f"{n} binary: {fp['path']} sha256 {fp['sha256']} built {fp['mtime']}"
                + (f" (tree {git})" if git and n == "peregrine" else ""))
    log(f"machine: {results['machine']['cpu_model']}, {results['machine']['cpus']} CPUs, "
        f"kernel {results['machine']['kernel']}, load {results['machine']['loadavg_start']}")
    log(f"servers pinned to CPU {SERVER_CPU}, wrk/client to CPU {CLIENT_CPU}; RLIMIT_NOFILE {nofile}; temp dir {tmp}")
    rc = 0
    try:
        # Filled as the scenarios end, so that an interrupted run still writes what it measured.
        if args.rounds == 1:
            rounds = [results["scenarios"]]
        else:
            del results["scenarios"]
            rounds = results["rounds"] = []
        for k in range(args.rounds):
            if args.rounds > 1:
                # Each round in its own directory: its servers start afresh, their logs stay apart.
                ctx["tmp"] = os.path.join(tmp, f"round{k + 1}")
                log("")
                log(f"=== round {k + 1}/{args.rounds}")
                rounds.append({})
            rc = max(rc, run_round(names, ctx, args, rounds[k]))
        if args.rounds > 1 or len(peregrines) > 1:
            summary = across_rounds(rounds, names)
            results["across_rounds"] = summary
            print_across_rounds(summary, names, args.rounds, peregrines if len(peregrines) > 1 else [],
                                args.tolerance)
        results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for n in peregrines:
            prints = args._server_classes[n].fingerprints
            if prints and n == "peregrine":
                results["peregrine_binaries"] = prints
            elif prints:
                results.setdefault("peregrine_binaries_seen", {})[n] = prints
        results["machine"]["loadavg_end"] = (read_file("/proc/loadavg", "") or "").strip()
    except (ServerError, BenchError) as e:
        log(f"\n*** ERROR: {e}")
        rc = 1
    except KeyboardInterrupt:
        log("\ninterrupted")
        rc = 130
    except SystemExit as e:
        log("\nterminated by a signal")
        rc = e.code if isinstance(e.code, int) else 1
    finally:
        for s in ctx["running"]:
            s.stop()
        procs.REAPER.close()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2, sort_keys=False)
                f.write("\n")
            log(f"\nJSON written to {args.json}")
        if args.keep_tmp or rc == 1:
            log(f"temp dir kept (configs and server logs): {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if skipped:
        log("")
        for n, why in skipped.items():
            log(f"*** {n} was SKIPPED: {why}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
