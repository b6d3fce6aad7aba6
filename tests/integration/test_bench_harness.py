"""The pure parts of bench/peregrine_bench: wrk and ab output parsing, the per-run arithmetic,
medians and ratios, the tables' layout and the command line. No server runs here: the real
benchmark is not a test (bench/README.md), but what turns its tools' output into figures is.

Run: /usr/bin/python3 tests/integration/test_bench_harness.py [-v]
"""

import contextlib
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
import harness  # noqa: E402
from peregrine_bench import driver, load, measure, procs, report, scenarios, servers, syscalls  # noqa: E402
from peregrine_bench.common import BenchError  # noqa: E402

WRK_OUT = """Running 2s test @ http://127.0.0.1:42371/11.txt
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     7.40ms    1.23ms  16.76ms   80.00%
    Req/Sec    13.57k     1.00k   14.52k    85.00%
  Latency Distribution
     50%  750.00us
     75%    7.80ms
     90%    8.50ms
     99%    1.20s
  27016 requests in 2.00s, 6.31MB read
  Socket errors: connect 1, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 5
Requests/sec:  13508.00
Transfer/sec:      3.15MB
"""

AB_OUT = """Server Software:
Server Hostname:        127.0.0.1
Concurrency Level:      100
Time taken for tests:   4.403 seconds
Complete requests:      10000
Failed requests:        0
Keep-Alive requests:    10000
Total transferred:      1330000 bytes
Requests per second:    2271.01 [#/sec] (mean)
"""


def capture(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue().splitlines()


class WrkOutput(unittest.TestCase):
    def test_every_field(self):
        r = load.parse_wrk(WRK_OUT)
        self.assertEqual(r["rps"], 13508.0)
        self.assertEqual(r["requests"], 27016)
        self.assertAlmostEqual(r["wrk_seconds"], 2.0)
        self.assertAlmostEqual(r["p50_ms"], 0.75)
        self.assertAlmostEqual(r["p99_ms"], 1200.0)
        self.assertEqual(r["socket_errors"], {"connect": 1, "read": 3, "write": 0, "timeout": 2})
        self.assertEqual(r["non_2xx_3xx"], 5)
        self.assertEqual(r["errors"], 11)

    def test_a_clean_run_has_no_error_lines(self):
        clean = "\n".join(line for line in WRK_OUT.splitlines()
                          if "Socket errors" not in line and "Non-2xx" not in line)
        r = load.parse_wrk(clean)
        self.assertEqual(r["errors"], 0)
        self.assertEqual(r["socket_errors"], {"connect": 0, "read": 0, "write": 0, "timeout": 0})

    def test_a_run_line_names_its_kinds_of_error(self):
        self.assertEqual(driver.error_kinds(load.parse_wrk(WRK_OUT)),
                         "connect 1, read 3, timeout 2, non-2xx 5")

    def test_no_requests_line_is_an_error(self):
        with self.assertRaises(BenchError):
            load.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")

    def test_latency_units(self):
        for text, ms in (("500us", 0.5), ("2.5ms", 2.5), ("1.5s", 1500.0), ("2m", 120000.0), ("1h", 3600000.0)):
            self.assertAlmostEqual(load.to_ms(text), ms, msg=text)
        with self.assertRaises(BenchError):
            load.to_ms("3 parsecs")

    def test_command(self):
        sc = {"conns": 100, "close": True, "path": "/11.txt"}
        self.assertEqual(load.wrk_command(8080, sc, 5),
                         ["taskset", "-c", "1", "wrk", "-t1", "-c100", "-d5s", "--latency",
                          "-H", "Connection: close", "http://127.0.0.1:8080/11.txt"])


class AbOutput(unittest.TestCase):
    def test_full_report(self):
        self.assertEqual(load.parse_ab(AB_OUT, ""), {"complete": 10000, "failed": 0, "keep_alive": 10000,
                                                     "non_2xx": 0, "rps": 2271.01})

    def test_gave_up_before_the_report(self):
        err = "apr_pollset_poll: The timeout specified has expired (70007)\nTotal of 9908 requests completed\n"
        r = load.parse_ab("Benchmarking 127.0.0.1 (be patient)\n", err)
        self.assertEqual(r["complete"], 9908)
        self.assertIsNone(r["keep_alive"])
        self.assertIsNone(r["rps"])


class Measurement(unittest.TestCase):
    def test_tree_is_the_group_and_every_descendant(self):
        # pid -> (ppid, pgrp, ticks): 100 leads the group; 103 left it by setsid() but is 101's
        # child, 104 its grandchild; 200 is someone else.
        table = {100: (1, 100, 0), 101: (100, 100, 0), 103: (101, 103, 0), 104: (103, 103, 0),
                 200: (1, 200, 0)}
        self.assertEqual(measure.tree_members(100, table), [100, 101, 103, 104])
        self.assertEqual(measure.tree_members(999, table), [])

    def test_per_request(self):
        cpus0 = {"cpu0": (100, 1000), "cpu1": (0, 1000)}
        cpus1 = {"cpu0": (600, 2000), "cpu1": (1000, 2000)}
        r = measure.per_request((1_000_000, 10, 5), (21_000_000, 10 + measure.CLK_TCK // 50, 505),
                                1000, 0.04, cpus0, cpus1)
        self.assertAlmostEqual(r["cpu_us_per_req"], 20.0)
        self.assertAlmostEqual(r["cpu_us_per_req_ticks"], 20.0)
        self.assertAlmostEqual(r["runs_per_req"], 0.5)
        self.assertAlmostEqual(r["server_cpu_util"], 0.5)
        self.assertAlmostEqual(r["cpu0_busy"], 0.5)
        self.assertAlmostEqual(r["cpu1_busy"], 1.0)
        self.assertIsNone(measure.per_request((0, 0, 0), (5, 0, 0), 0, 1.0, {}, {})["cpu_us_per_req"])


def load_entry(cpu, rps=1000.0):
    run = {"rps": rps, "requests": 100, "cpu_us_per_req": cpu, "cpu_us_per_req_ticks": cpu,
           "runs_per_req": 0.5, "p50_ms": 1.0, "p99_ms": 2.0, "errors": 0, "server_cpu_util": 0.9,
           "cpu0_busy": 0.95, "cmd": "wrk ..."}
    return {"runs": [run], "rss_kb_after": (4096, 5120)}


class Figures(unittest.TestCase):
    def test_median_ignores_missing_figures(self):
        self.assertEqual(report.median([3, None, 1, 2]), 2)
        self.assertEqual(report.median([1, 2, 3, 4]), 2.5)
        self.assertIsNone(report.median([None]))

    def test_fmt_and_ratio(self):
        self.assertEqual(report.fmt(None, "8.2f"), "       -")
        self.assertEqual(report.fmt(1.5, "8.2f"), "    1.50")
        self.assertEqual(report.ratio(None, 6), "     -")
        self.assertEqual(report.ratio(0.644, 6), " 0.64x")

    def test_ratios_to_nginx_and_the_best_reference(self):
        summ = {n: report.summarize_load(load_entry(c)) for n, c in
                (("peregrine", 10.0), ("nginx", 20.0), ("h2o", 16.0))}
        report.ratio_fields(summ, ["peregrine", "nginx", "h2o"])
        self.assertAlmostEqual(summ["peregrine"]["cpu_vs_nginx"], 0.5)
        self.assertAlmostEqual(summ["peregrine"]["cpu_vs_best_ref"], 10 / 16)
        self.assertAlmostEqual(summ["nginx"]["cpu_vs_best_ref"], 20 / 16)
        self.assertAlmostEqual(summ["nginx"]["rss_mb"], 4.0)

    def test_compare_within_tolerance(self):
        self.assertEqual(report.compare(10.0, 10.3, 3.0)[1], "ok")
        self.assertEqual(report.compare(10.0, 9.0, 3.0)[1], "ok")
        r, verdict = report.compare(10.0, 10.4, 3.0)
        self.assertAlmostEqual(r, 1.04)
        self.assertEqual(verdict, "SLOWER")
        self.assertEqual(report.compare(None, 10.0, 3.0), (None, "-"))


class Tables(unittest.TestCase):
    ARGS = types.SimpleNamespace(runs=1, duration=2, warmup=2)

    def scenario(self, order):
        res = {"servers": {n: load_entry(c) for n, c in zip(order, (10.0, 20.0, 16.0))}, "loadavg": "0.1"}
        for e in res["servers"].values():
            e["summary"] = report.summarize_load(e)
        report.ratio_fields({n: e["summary"] for n, e in res["servers"].items()}, order)
        return res

    def test_load_table_layout_is_unchanged(self):
        # The layout docs/performance.md and bench/README.md quote, column for column.
        order = ["peregrine", "nginx"]
        sc = {"desc": "11-byte file", "length": 11}
        lines = capture(report.print_load_table, "small", sc, self.scenario(order), order, self.ARGS)
        self.assertEqual(lines[1], "== small: 11-byte file")
        self.assertEqual(lines[3], "   server          req/s  CPU us/req   p99 ms  errors  RSS MB srv CPU% "
                                   "CPU vs nginx vs best ref runs/req")
        self.assertEqual(lines[4], "   peregrine        1000       10.00     2.00       0     4.0      90% "
                                   "       0.50x       0.50x     0.50")

    def test_labelled_builds_widen_the_name_column(self):
        order = ["peregrine-old", "peregrine-new", "nginx"]
        sc = {"desc": "11-byte file", "length": 11}
        lines = capture(report.print_load_table, "small", sc, self.scenario(order), order, self.ARGS)
        self.assertTrue(lines[3].startswith("   server             req/s"), lines[3])
        self.assertTrue(lines[5].startswith("   peregrine-new       1000"), lines[5])

    def test_across_rounds_medians_and_comparison(self):
        order = ["peregrine-old", "peregrine-new", "nginx"]

        def round_(old, new):
            return {"small": {"servers": {"peregrine-old": {"summary": {"cpu_us_per_req": old}},
                                          "peregrine-new": {"summary": {"cpu_us_per_req": new}},
                                          "nginx": {"skipped": "not installed"}}},
                    "idle10k": {"servers": {"peregrine-old": {"summary": {"kb_per_conn": 1.0}},
                                            "peregrine-new": {"summary": {"kb_per_conn": 1.0}}}},
                    "close": {"error": "server died"}}
        summary = report.across_rounds([round_(10.0, 10.1), round_(11.0, 12.0), round_(10.5, 10.6)], order)
        self.assertEqual(summary["small"]["peregrine-old"], {"metric": "cpu_us_per_req",
                                                             "rounds": [10.0, 11.0, 10.5], "median": 10.5})
        self.assertEqual(summary["small"]["peregrine-new"]["median"], 10.6)
        self.assertNotIn("nginx", summary["small"])
        self.assertEqual(summary["idle10k"]["peregrine-new"]["metric"], "kb_per_conn")
        self.assertEqual(summary["close"], {})
        lines = capture(report.print_across_rounds, summary, order, 3, order[:2], 3.0)
        small = next(line for line in lines if line.startswith("   small"))
        self.assertIn("10.50", small)
        self.assertIn("10.60", small)
        self.assertTrue(small.endswith("1.010x ok"), small)
        self.assertIn("peregrine-new / peregrine-old", lines[2])


class CommandLine(unittest.TestCase):
    def test_defaults_keep_the_canonical_orders(self):
        args = driver.parse_args(["--servers", "nginx,peregrine", "--scenarios", "hello,small,proxy_slow"])
        self.assertEqual(args.servers, ["peregrine", "nginx"])
        self.assertEqual(args.scenarios, ["small", "hello", "proxy_slow100", "proxy_slow500", "proxy_slow1000"])
        self.assertEqual(args.rounds, 1)
        self.assertIs(args._server_classes["peregrine"], servers.Peregrine)

    def test_two_builds_take_peregrines_place(self):
        args = driver.parse_args(["--servers", "peregrine,nginx", "--peregrine-binary", "old=/tmp/a",
                                  "--peregrine-binary", "new=/tmp/b", "--rounds", "3"])
        self.assertEqual(args.servers, ["peregrine-old", "peregrine-new", "nginx"])
        old, new = args._server_classes["peregrine-old"], args._server_classes["peregrine-new"]
        self.assertTrue(issubclass(old, servers.Peregrine))
        self.assertEqual((old.name, old.binary_path(args)), ("peregrine-old", "/tmp/a"))
        self.assertEqual(new.binary_path(args), "/tmp/b")
        self.assertIsNot(old.fingerprints, new.fingerprints)
        self.assertEqual(servers.Peregrine.binary_path(args), args.peregrine)

    def test_bad_arguments(self):
        for argv in (["--servers", "apache"], ["--scenarios", "nope"], ["--runs", "0"], ["--rounds", "0"],
                     ["--servers", "nginx", "--peregrine-binary", "a=/x"], ["--peregrine-binary", "/x"],
                     ["--peregrine-binary", "a=/x", "--peregrine-binary", "a=/y"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit):
                    driver.parse_args(argv)


H2LOAD_OUT = """starting benchmark...
spawning thread #0: 100 total client(s). Timing-based test with 0s of warm-up time and 3s of main duration for measurements.
TLS Protocol: TLSv1.3
Cipher: TLS_AES_256_GCM_SHA384
Server Temp Key: X25519 253 bits
Application protocol: h2
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 3.08s, 8065.00 req/s, 1.03MB/s
requests: 24195 total, 25195 started, 24195 done, 24190 succeeded, 3 failed, 1 errored, 1 timeout
status codes: 24180 2xx, 0 3xx, 8 4xx, 2 5xx
traffic: 3.10MB (3247030) total, 2.42MB (2540475) headers (space savings 40.00%), 259.91KB (266145) data
                     min         max         mean         sd        +/- sd
time for request:    11.96ms    239.62ms    102.89ms     30.08ms    82.22%
"""

PB_JSON = """{"url": "https://127.0.0.1:1/11.txt", "time_taken_s": 3.0, "complete_requests": 1500,
 "failed_requests": 2, "failures": {"connect": 1, "read": 1, "write": 0, "timeout": 0, "protocol": 0, "length": 0},
 "non_2xx_responses": 5, "status_codes": {"200": 1493, "404": 4, "503": 1}, "requests_per_second": 500.0,
 "percentiles_ms": {"50": 1.5, "99": 9.25}, "protocol": "HTTP/1.1", "tls": {"handshakes": 1500, "resumed": 1450,
 "resume_requested": true}, "h2": {"rst_stream": 0, "goaway": 0}, "retried": 0, "connections_opened": 1500}"""


class TlsAndH2Load(unittest.TestCase):
    def test_h2load_output(self):
        r = load.parse_h2load(H2LOAD_OUT)
        self.assertEqual(r["requests"], 24190)  # succeeded
        self.assertEqual(r["rps"], 8065.0)
        self.assertAlmostEqual(r["wrk_seconds"], 3.08)
        self.assertEqual(r["socket_errors"], {"failed": 3, "errored": 1, "timeout": 1})
        self.assertEqual(r["non_2xx_3xx"], 10)
        self.assertEqual(r["errors"], 15)
        self.assertEqual(r["protocol"], "h2")
        self.assertAlmostEqual(r["mean_ms"], 102.89)
        self.assertIsNone(r["p99_ms"])
        # h2load fell back to HTTP/1.1 (the server did not select h2): an error of the row
        r = load.parse_h2load(H2LOAD_OUT.replace("Application protocol: h2", "Application protocol: http/1.1"))
        self.assertEqual(r["errors"], 16)
        with self.assertRaises(BenchError):
            load.parse_h2load("connect failed\n")

    def test_peregrine_bench_json(self):
        r = load.parse_pb(PB_JSON)
        self.assertEqual(r["requests"], 1498)
        self.assertEqual(r["non_2xx_3xx"], 5)
        self.assertEqual(r["errors"], 7)
        self.assertEqual((r["p50_ms"], r["p99_ms"]), (1.5, 9.25))
        self.assertEqual(r["tls"]["resumed"], 1450)
        with self.assertRaises(BenchError):
            load.parse_pb("peregrine-bench: cannot resolve")

    def test_commands(self):
        args = types.SimpleNamespace(peregrine_bench="/pb", h2_client=None)
        srv = types.SimpleNamespace(port=8443)
        sc = driver.SCENARIOS["tls_resume"]
        cmd, parse = load.load_command(srv, sc, 10, args)
        self.assertIs(parse, load.parse_pb)
        self.assertEqual(cmd, ["taskset", "-c", "1", "/pb", "--json", "-q", "-W", "1", "-c", "50", "--duration",
                               "10s", "--tls-resume", "https://127.0.0.1:8443/11.txt"])
        cmd, _ = load.load_command(srv, driver.SCENARIOS["tls_handshake"], 10, args)
        self.assertNotIn("-k", cmd)
        self.assertNotIn("--tls-resume", cmd)
        cmd, parse = load.load_command(srv, driver.SCENARIOS["h2_page"], 10, args)
        self.assertIs(parse, load.parse_h2load)
        self.assertEqual(cmd, ["taskset", "-c", "1", "h2load", "-t1", "-c", "100", "-m", "10", "-D", "10",
                               "https://127.0.0.1:8443/663.html"])
        cmd, parse = load.load_command(srv, driver.SCENARIOS["tls_small"], 10, args)
        self.assertIs(parse, load.parse_wrk)
        self.assertEqual(cmd[-1], "https://127.0.0.1:8443/11.txt")
        args.h2_client = "peregrine-bench"
        cmd, parse = load.load_command(srv, driver.SCENARIOS["h2_small"], 10, args)
        self.assertIs(parse, load.parse_pb)
        self.assertEqual(cmd[-5:], ["-k", "--h2", "-m", "10", "https://127.0.0.1:8443/11.txt"])

    def test_scenario_alias_and_options(self):
        args = driver.parse_args(["--scenarios", "tls", "--h2-client", "peregrine-bench"])
        self.assertEqual(args.scenarios, ["tls_small", "tls_page", "tls_handshake", "tls_resume", "h2_small",
                                          "h2_page", "h2_php_hello", "tls_idle10k"])
        self.assertEqual(args.h2_client, "peregrine-bench")
        self.assertTrue(args.peregrine_bench.endswith("build/release/peregrine-bench"))


class TlsConfigs(unittest.TestCase):
    """Each server's generated TLS config: the same certificate, TLS 1.2 and 1.3, h2 by ALPN."""

    def make(self, cls, scenario="tls_small"):
        import tempfile
        tmp = tempfile.mkdtemp(prefix="bench-harness-")
        self.addCleanup(__import__("shutil").rmtree, tmp, True)
        s = cls(tmp, "/srv/www", 20000)
        s.port = 8443
        s.scenario = scenario
        s.tls = ("/c/cert.pem", "/c/key.pem")
        args = types.SimpleNamespace(peregrine="/bin/peregrine")
        cmd = s.make_command(args)
        with open(s.config_path) as f:
            return cmd, f.read()

    def test_peregrine_keys_in_one_place(self):
        _, conf = self.make(servers.Peregrine)
        self.assertIn('listen = [{ address = "127.0.0.1:8443", tls = true }]', conf)
        self.assertIn('[site.tls]\ncertificate = "/c/cert.pem"\nkey = "/c/key.pem"\n', conf)
        # the site table comes after the site's own keys and before its routes (valid TOML)
        self.assertLess(conf.index('access_log = "off"'), conf.index("[site.tls]"))
        self.assertLess(conf.index("[site.tls]"), conf.index("[[site.route]]"))
        import tomllib
        parsed = tomllib.loads(conf)
        self.assertEqual(parsed["site"][0]["tls"], {"certificate": "/c/cert.pem", "key": "/c/key.pem"})
        self.assertEqual(parsed["listen"], [{"address": "127.0.0.1:8443", "tls": True}])
        _, plain = self.make(servers.Peregrine, "small")
        self.assertNotIn("tls", plain)

    def test_nginx(self):
        _, conf = self.make(servers.Nginx)
        self.assertIn("listen 127.0.0.1:8443 ssl http2;", conf)
        self.assertIn("ssl_certificate /c/cert.pem;", conf)
        self.assertIn("ssl_protocols TLSv1.2 TLSv1.3;", conf)
        self.assertNotIn("keepalive_requests", conf)
        _, h2 = self.make(servers.Nginx, "h2_small")
        self.assertIn("keepalive_requests 1000000000;", h2)
        _, plain = self.make(servers.Nginx, "small")
        self.assertIn("listen 127.0.0.1:8443;", plain)
        self.assertNotIn("ssl", plain)

    def test_h2o(self):
        _, conf = self.make(servers.H2O)
        self.assertIn("  port: 8443\n  ssl:\n    certificate-file: /c/cert.pem\n    key-file: /c/key.pem\n"
                      "    minimum-version: TLSv1.2\n", conf)

    def test_lighttpd(self):
        _, conf = self.make(servers.Lighttpd)
        self.assertIn('ssl.engine = "enable"', conf)
        self.assertIn('ssl.pemfile = "/c/cert.pem"', conf)
        self.assertIn('ssl.privkey = "/c/key.pem"', conf)
        ok, why = servers.Lighttpd.supports("tls_small")
        if not servers.Lighttpd.openssl_available():
            self.assertFalse(ok)
            self.assertIn("lighttpd-mod-openssl", why)

    def test_target_line(self):
        order = ["peregrine", "nginx", "h2o"]
        res = {"servers": {n: {"runs": [dict(rps=1000.0, requests=1000, cpu_us_per_req=c, cpu_us_per_req_ticks=c,
                                             runs_per_req=0.1, p50_ms=1.0, p99_ms=2.0, errors=e,
                                             server_cpu_util=0.9, cpu0_busy=0.95, cmd="x")]}
                           for n, c, e in zip(order, (9.0, 12.0, 10.0), (0, 0, 3))}, "loadavg": "0"}
        for e in res["servers"].values():
            e["summary"] = report.summarize_load(e)
        report.ratio_fields({n: e["summary"] for n, e in res["servers"].items()}, order)
        args = types.SimpleNamespace(runs=1, duration=10, warmup=2)
        res["servers"]["lighttpd"] = {"error": "lighttpd exited during start-up\nits log"}
        lines = capture(report.print_load_table, "tls_small", driver.SCENARIOS["tls_small"], res,
                        order + ["lighttpd"], args)
        # a server that could not start is listed, and the others' figures are still there
        self.assertIn("   lighttpd   FAILED: lighttpd exited during start-up", lines)
        self.assertIn("   target peregrine: CPU/request <= 0.9x the best of nginx, H2O and lighttpd: 0.90x (met)",
                      lines)
        self.assertIn("   ERRORS (zero expected in every row): h2o", lines)
        lines = capture(report.print_load_table, "h2_php_hello", driver.SCENARIOS["h2_php_hello"], res, order,
                        args)
        self.assertIn("   target peregrine: CPU/request <= 0.7x nginx: 0.75x (NOT met)", lines)


STRACE_OUT = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 15.93    0.031452           5      5307         9 recvfrom
 72.83    0.143815          27      5296           sendto
  9.52    0.018793          26       722           epoll_wait
  0.53    0.001038          86        12         1 accept4
------ ----------- ----------- --------- --------- ----------------
100.00    0.197462          17     11337        10 total
"""

PERF_OUT = """# started on Tue Dec  1 23:49:27 2026

11,,syscalls:sys_enter_close,164523739,100.00,,
0,,syscalls:sys_enter_read,164523739,100.00,,
<not counted>,,syscalls:sys_enter_write,0,100.00,,
3196,,syscalls:sys_enter_epoll_wait,164523739,100.00,,
10704,,syscalls:sys_enter_recvfrom,164523739,100.00,,
10693,,syscalls:sys_enter_sendto,164523739,100.00,,
"""


def bench_tool_binary(test, target, source, libs=()):
    """build/release/TARGET, or bench/SOURCE compiled into a temp dir (the bench's tools are not in
    the default build), so the tool's real behaviour is always tested."""
    built = os.path.join(harness.REPO, "build", "release", target)
    if os.access(built, os.X_OK):
        return built
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        test.skipTest(f"no {target} build and no C++ compiler")
    tmp = tempfile.mkdtemp(prefix=f"{target}-")
    test.addCleanup(shutil.rmtree, tmp, True)
    out = os.path.join(tmp, target)
    subprocess.run([compiler, "-std=c++20", "-O2", "-o", out, os.path.join(harness.REPO, "bench", source), *libs],
                   check=True)
    return out


def canned_epoll_binary(test):
    return bench_tool_binary(test, "canned-epoll", "canned_epoll.cc")


class IoUringAndFloor(unittest.TestCase):
    """Issue 19's rows: peregrine-uring, the canned-epoll floor, and the --syscalls pass."""

    def make(self, cls, scenario, **args):
        tmp = tempfile.mkdtemp(prefix="bench-harness-")
        self.addCleanup(shutil.rmtree, tmp, True)
        s = cls(tmp, "/srv/www", 20000)
        s.port = 8080
        s.scenario = scenario
        return s, s.make_command(types.SimpleNamespace(peregrine="/bin/peregrine", canned_epoll="/bin/ce", **args))

    def test_uring_is_the_same_binary_on_io_uring(self):
        import tomllib
        s, cmd = self.make(servers.PeregrineUring, "small")
        self.assertEqual(cmd, ["/bin/peregrine", "-c", s.config_path])
        with open(s.config_path) as f:
            self.assertEqual(tomllib.loads(f.read())["event_backend"], "io_uring")
        _, quick = self.make(servers.PeregrineUring, "ab_page_k")
        self.assertEqual(quick[-2:], ["--event-backend", "io_uring"])
        s, _ = self.make(servers.Peregrine, "small")
        with open(s.config_path) as f:
            self.assertNotIn("event_backend", f.read())
        self.assertNotIn("--event-backend", self.make(servers.Peregrine, "ab_page_k")[1])
        self.assertIsNot(servers.PeregrineUring.fingerprints, servers.Peregrine.fingerprints)

    def test_canned_epoll_only_where_a_canned_reply_is_a_floor(self):
        for name in ("small", "page", "c1000", "small_c1000"):
            self.assertEqual(servers.CannedEpoll.supports(name), (True, ""), name)
            _, cmd = self.make(servers.CannedEpoll, name)
            self.assertEqual(cmd, ["/bin/ce", "8080", "/srv/www" + driver.SCENARIOS[name]["path"]])
        for name in ("close", "hello", "large", "php_hello", "proxy_small", "tls_small", "idle10k"):
            ok, why = servers.CannedEpoll.supports(name)
            self.assertFalse(ok, name)
            self.assertIn("does not parse", why)

    def test_quick_mode_only_where_its_flags_reach_the_handler(self):
        for name in ("php_hello", "php_hello_quick", "ab_app_c500", "small"):
            self.assertEqual(servers.PeregrineQuick.supports(name), (True, ""), name)
        for name in ("proxy_small", "proxy_slow500"):
            ok, why = servers.PeregrineQuick.supports(name)
            self.assertFalse(ok, name)
            self.assertIn("/app/", why)

    def test_a_missing_canned_epoll_says_how_to_build_it(self):
        ok, why = servers.CannedEpoll.available(types.SimpleNamespace(canned_epoll="/nonexistent/canned-epoll"))
        self.assertFalse(ok)
        self.assertIn("--target canned-epoll", why)

    def test_command_line(self):
        args = driver.parse_args(["--servers", "nginx,canned-epoll,peregrine-uring,peregrine", "--scenarios", "uring"])
        self.assertEqual(args.servers, ["peregrine", "peregrine-uring", "canned-epoll", "nginx"])
        self.assertEqual(args.scenarios, ["small", "page", "c1000", "small_c1000", "small_c5", "small_c10",
                                          "php_hello", "proxy_small"])
        self.assertEqual(args.syscalls, [])
        self.assertEqual(driver.parse_args(["--syscalls"]).syscalls, ["strace"])
        self.assertEqual(driver.parse_args(["--syscalls", "strace,perf"]).syscalls, ["strace", "perf"])
        for argv in (["--syscalls", "dtrace"], ["--syscalls-seconds", "0"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit):
                    driver.parse_args(argv)

    def test_a_refusing_server_skips_only_itself(self):
        class Other(servers.Server):
            name = "other"

            @classmethod
            def supports(cls, scenario):
                return False, "another reason"

        args = driver.parse_args(["--servers", "canned-epoll", "--scenarios", "hello"])
        args._server_classes["other"] = Other
        args._tls = None
        res = driver.run_load_scenario("hello", ["canned-epoll", "other"], {}, args)
        self.assertIn("does not parse", res["servers"]["canned-epoll"]["skipped"])
        self.assertEqual(res["servers"]["other"], {"skipped": "another reason"})

    def test_strace_and_perf_counts(self):
        counts = syscalls.parse_strace(STRACE_OUT)
        self.assertEqual(counts, {"recvfrom": 5307, "sendto": 5296, "epoll_wait": 722, "accept4": 12})
        s = syscalls.summarize(counts, 5287, top=2)
        self.assertEqual(s["calls"], 11337)
        self.assertAlmostEqual(s["per_request"], 11337 / 5287)
        self.assertEqual([t[:2] for t in s["top"]], [["recvfrom", 5307], ["sendto", 5296]])
        self.assertEqual(syscalls.parse_perf(PERF_OUT), {"close": 11, "epoll_wait": 3196, "recvfrom": 10704,
                                                         "sendto": 10693})
        self.assertIsNone(syscalls.summarize(counts, 0)["per_request"])
        for parse in (syscalls.parse_strace, syscalls.parse_perf):
            with self.assertRaises(BenchError):
                parse("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted\n")
        self.assertIn("-f", syscalls.strace_command([5, 6], "/o"))
        self.assertEqual(syscalls.strace_command([5, 6], "/o")[-4:], ["-p", "5", "-p", "6"])
        self.assertEqual(syscalls.perf_command([5, 6], "/o")[-2:], ["-p", "5,6"])

    def test_uring_targets_and_syscall_table(self):
        res = {"scenario": "c1000", "servers": {}}
        for n, cpu in (("peregrine", 10.0), ("peregrine-uring", 8.0), ("canned-epoll", 9.0)):
            res["servers"][n] = load_entry(cpu)
            res["servers"][n]["summary"] = report.summarize_load(res["servers"][n])
        res["servers"]["peregrine-uring"]["syscalls"] = {
            "strace": syscalls.summarize({"sendto": 2000, "io_uring_enter": 20}, 2000)}
        res["servers"]["peregrine"]["syscalls"] = {"strace": {"error": "strace did not attach\nlog"}}
        res["servers"]["canned-epoll"]["syscalls"] = {"strace": syscalls.summarize({"accept4": 600}, 0)}
        lines = capture(report.uring_lines, "c1000", res)
        self.assertEqual(lines, [
            "   target peregrine-uring: CPU/request <= 0.85x peregrine (epoll), run by run: 0.80; median 0.80x (met)",
            "   target peregrine-uring: CPU/request < 1.00x canned-epoll (the epoll floor), run by run: 0.89; "
            "median 0.89x (met)"])
        proxy = {"servers": {n: {"summary": {"cpu_us_per_req": c}} for n, c in
                             (("peregrine-uring", 14.0), ("nginx", 30.0), ("h2o", 20.0), ("lighttpd", 10.0))}}
        self.assertEqual(capture(report.uring_lines, "proxy_small", proxy),
                         ["   target peregrine-uring: CPU/request <= 0.7x the best of nginx and H2O: 0.70x (met)"])
        few = {"servers": {"peregrine": load_entry(9.0, rps=1000.0), "peregrine-uring": load_entry(8.0, rps=960.0)}}
        self.assertEqual(capture(report.uring_lines, "small_c5", few),
                         ["   guard peregrine-uring: req/s >= 0.97x peregrine (epoll), run by run: 0.96; median 0.96x "
                          "(NOT met)"])
        lines = capture(report.syscall_lines, res, ["peregrine", "peregrine-uring", "canned-epoll"],
                        types.SimpleNamespace(syscalls_seconds=3))
        self.assertIn("   peregrine       FAILED: strace did not attach", lines)
        self.assertIn("   peregrine-uring      1.01      2000  sendto 1.000, io_uring_enter 0.010", lines)
        self.assertIn("   canned-epoll            -         0  no request answered in the pass (raise "
                      "--syscalls-seconds)", lines)
        self.assertTrue(lines[-1].startswith("   note: peregrine-uring, canned-epoll: fewer than 20 requests per "
                                             "connection"), lines[-1])

    def test_canned_epoll_answers_with_the_file_on_one_connection(self):
        binary = canned_epoll_binary(self)
        tmp = tempfile.mkdtemp(prefix="canned-body-")
        self.addCleanup(shutil.rmtree, tmp, True)
        body = bytes(range(256)) * 3
        with open(os.path.join(tmp, "body"), "wb") as f:
            f.write(body)
        port = procs.free_port()
        p = subprocess.Popen([binary, str(port), os.path.join(tmp, "body")], stdout=subprocess.PIPE)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        self.assertIn(b"listening", p.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            for _ in range(2):  # keep-alive: the same reply to each request
                c.sendall(b"GET /anything HTTP/1.1\r\nHost: x\r\n\r\n")
                data = b""
                while not procs.response_complete(data):
                    chunk = c.recv(65536)
                    self.assertTrue(chunk, "canned-epoll closed the connection")
                    data += chunk
                status, headers, got = procs.parse_response(data, "/anything")
                self.assertEqual((status, headers["content-length"], got), (200, str(len(body)), body))
        missing = subprocess.run([binary, str(port), os.path.join(tmp, "nope")], capture_output=True)
        self.assertEqual(missing.returncode, 1)
        self.assertIn(b"cannot read", missing.stderr)

    def test_syscall_pass_on_the_floor(self):
        """The whole --syscalls pass, real: canned-epoll under wrk with strace (and perf) attached
        makes one recvfrom and one sendto per request."""
        tools = [t for t in syscalls.TOOLS if shutil.which(t)]
        if not (shutil.which("wrk") and shutil.which("taskset") and tools):
            self.skipTest("needs wrk, taskset and strace or perf")
        tmp = tempfile.mkdtemp(prefix="bench-syscalls-")
        self.addCleanup(shutil.rmtree, tmp, True)
        scenarios.make_docroot(os.path.join(tmp, "www"))
        args = types.SimpleNamespace(canned_epoll=canned_epoll_binary(self), h2_client=None)
        s = servers.CannedEpoll(os.path.join(tmp, "ce"), os.path.join(tmp, "www"), 1024)
        s.scenario = "small"
        s.start(args, scenarios.check_paths_for(["small"]))
        self.addCleanup(s.stop)
        # 10 connections: their set-up calls, the requests in flight when wrk stops (their calls are
        # counted, not the requests) and the reads of each connection's end stay small beside the
        # requests even when strace is slow.
        sc = dict(scenarios.SCENARIOS["small"], conns=10)
        for tool in tools:
            with self.subTest(tool=tool):
                try:
                    c = syscalls.count_pass(s, sc, 2, tool, args, tmp, load.wrk_run)
                except BenchError as e:
                    if "not permitted" in str(e) or "Permission denied" in str(e):
                        self.skipTest(f"{tool} may not attach here: {e}")
                    raise
                self.assertGreater(c["requests"], 100)
                per = {name: n / c["requests"] for name, n in c["counts"].items()}
                for call in ("recvfrom", "sendto"):
                    self.assertGreater(per.get(call, 0), 0.95, (call, c))
                    self.assertLess(per.get(call, 0), 1.05 + 2 * sc["conns"] / c["requests"], (call, c))


    def test_syscall_cost_measures_each_operation(self):
        """bench/syscall_cost.cc, real: four positive figures, the batched NOP cheaper than an
        enter of its own (the bound docs/io_uring.md draws from them rests on that), and a
        refusal of a count too small for one batch."""
        built = bench_tool_binary(self, "syscall-cost", "syscall_cost.cc", ["-luring"])
        out = subprocess.run([built, "20000"], capture_output=True, text=True, timeout=60, check=True).stdout
        figures = dict(line.rsplit(" ", 2)[:2] for line in out.splitlines())
        self.assertEqual(sorted(figures), ["bare", "recv", "ring x1", "ring x64"], out)
        ns = {name: float(value) for name, value in figures.items()}
        self.assertTrue(all(v > 0 for v in ns.values()), out)
        self.assertLess(ns["ring x64"], ns["ring x1"], out)
        refused = subprocess.run([built, "10"], capture_output=True, text=True, timeout=10)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("usage", refused.stderr)


if __name__ == "__main__":
    harness.main()
