"""The scenarios: what each one requests, from how many connections, and the docroot they read."""

import os
import random

IDLE_CONNECTIONS = 10_000
HELLO_BODY = b"hello world"

# Docroot files: name -> size in bytes.
FILES = {"11.txt": 11, "663.html": 663, "135555.bin": 135_555}
PHP_SCRIPTS = {"hello.php": '<?php echo "hello world";\n', "info.php": "<?php phpinfo();\n"}

SCENARIOS = {
    # name: path, connections, Connection: close?, expected body length, description
    "small": dict(path="/11.txt", conns=100, close=False, length=11,
                  desc="11-byte file, 100 keep-alive connections"),
    "page": dict(path="/663.html", conns=100, close=False, length=663,
                 desc="663-byte page, 100 keep-alive connections"),
    "large": dict(path="/135555.bin", conns=100, close=False, length=135_555,
                  desc="135,555-byte file, 100 keep-alive connections"),
    "close": dict(path="/11.txt", conns=100, close=True, length=11,
                  desc="11-byte file, 100 connections, 'Connection: close' (new TCP connection per request)"),
    "c1000": dict(path="/663.html", conns=1000, close=False, length=663,
                  desc="663-byte page, 1,000 keep-alive connections"),
    "small_c1000": dict(path="/11.txt", conns=1000, close=False, length=11,
                        desc="11-byte file, 1,000 keep-alive connections"),
    # Few connections, where a server that holds replies to batch them loses requests per second.
    "small_c5": dict(path="/11.txt", conns=5, close=False, length=11,
                     desc="11-byte file, 5 keep-alive connections"),
    "small_c10": dict(path="/11.txt", conns=10, close=False, length=11,
                      desc="11-byte file, 10 keep-alive connections"),
    "hello": dict(path="/hello", conns=100, close=False, length=len(HELLO_BODY),
                  desc="fixed 'return 200 hello world' route (no file system), 100 keep-alive connections"),
    "idle10k": dict(path="/11.txt", conns=IDLE_CONNECTIONS, close=False, length=11,
                    desc="server RSS growth with 10,000 idle keep-alive connections"),
    # Behind a back end (bench/README.md "Back ends"): php-fpm, or an nginx on CPU 1.
    "php_hello": dict(path="/hello.php", conns=100, close=False, length=len(HELLO_BODY), expect=HELLO_BODY,
                      backend="php", ab=True,
                      desc="PHP 'hello world' through php-fpm (8 static children, CPU 1), 100 keep-alive connections"),
    "php_info": dict(path="/info.php", conns=100, close=False, length=None, min_length=10_000,
                     backend="php",
                     desc="PHP phpinfo() page through php-fpm (8 static children, CPU 1), 100 keep-alive connections"),
    # The README's PHP one-liner (`peregrine --root DIR --fastcgi unix:SOCKET`, no config file)
    # against php_hello's tuned config (issue 15: at most 1.1x its CPU per request). nginx runs
    # as its guides set PHP up (a php-fpm connection per request), as in the ab rows below.
    "php_hello_quick": dict(path="/hello.php", conns=100, close=False, length=len(HELLO_BODY),
                            expect=HELLO_BODY, backend="php", quick=True,
                            desc="PHP 'hello world' with Peregrine in quick mode (--root, --fastcgi), 100 keep-alive connections"),
    "proxy_small": dict(path="/663.html", conns=100, close=False, length=663, backend="http",
                        desc="reverse proxy of a 663-byte page from a back-end nginx (CPU 1), 100 keep-alive connections"),
}
# proxy_slow: a back end that holds every response SLOW_BACKEND_MS without burning CPU, at several
# concurrencies; "--scenarios proxy_slow" selects all of them.
SLOW_BACKEND_MS = 4
SLOW_CONCURRENCIES = (100, 500, 1000)
for _c in SLOW_CONCURRENCIES:
    SCENARIOS[f"proxy_slow{_c}"] = dict(
        path="/slow", conns=_c, close=False, length=len(HELLO_BODY), expect=HELLO_BODY, backend="http",
        desc=f"reverse proxy of a back end that answers after {SLOW_BACKEND_MS} ms, {_c:,} keep-alive connections")
# TLS and HTTP/2 (issue 13). Every server uses the same ECDSA P-256 self-signed certificate, made
# once per run (tls.py). `client`: the load generator ("wrk", "h2load", or "pb" for
# peregrine-bench); `h2`: HTTP/2 over TLS (ALPN) with `streams` per connection; `resume`: each new
# connection resumes the previous one's TLS session.
SCENARIOS.update({
    "tls_small": dict(path="/11.txt", conns=100, close=False, length=11, tls=True, client="wrk",
                      desc="HTTP/1.1 over TLS, 11-byte file, 100 keep-alive connections"),
    "tls_page": dict(path="/663.html", conns=100, close=False, length=663, tls=True, client="wrk",
                     desc="HTTP/1.1 over TLS, 663-byte page, 100 keep-alive connections"),
    "tls_handshake": dict(path="/11.txt", conns=50, close=True, length=11, tls=True, client="pb",
                          desc="a full TLS handshake per request (no keep-alive, no resumption), "
                               "11-byte file, 50 connections"),
    "tls_resume": dict(path="/11.txt", conns=50, close=True, length=11, tls=True, client="pb", resume=True,
                       desc="a resumed TLS handshake per request (session ticket of the previous "
                            "connection), 11-byte file, 50 connections"),
    "h2_small": dict(path="/11.txt", conns=100, streams=10, close=False, length=11, tls=True, h2=True,
                     client="h2load", desc="HTTP/2 over TLS, 11-byte file, 100 connections x 10 streams"),
    "h2_page": dict(path="/663.html", conns=100, streams=10, close=False, length=663, tls=True, h2=True,
                    client="h2load", desc="HTTP/2 over TLS, 663-byte page, 100 connections x 10 streams"),
    "h2_php_hello": dict(path="/hello.php", conns=100, streams=10, close=False, length=len(HELLO_BODY),
                         expect=HELLO_BODY, backend="php", tls=True, h2=True, client="h2load",
                         desc="PHP 'hello world' through php-fpm over HTTP/2 (TLS), 100 connections x 10 "
                              "streams"),
    "tls_idle10k": dict(path="/11.txt", conns=IDLE_CONNECTIONS, close=False, length=11, tls=True, idle=True,
                        desc="server RSS growth with 10,000 idle TLS keep-alive connections"),
})
SCENARIOS["idle10k"]["idle"] = True
# The ab commands of the posts our users cite (issue 15), run as the posts ran them: ab is the
# client (a fixed number of requests, not --duration seconds), pinned to CPU 1 with php-fpm and
# the back end; Peregrine runs in quick mode, from command-line flags as a new user types them
# (`--root`, `--fastcgi`, `--proxy /app/=URL`), where nginx has its config file. `ab_args`: what
# goes before the URL. /app/slow reaches the 4 ms back end (as /slow once --proxy strips /app/).
AB_POSTS = {
    "ab_large_c1000": ("/135555.bin", None, "-c 1000 -n 10000", "135,555-byte file"),
    "ab_phpinfo_c1000": ("/info.php", "php", "-c 1000 -n 10000", "PHP phpinfo() page"),
    "ab_phpinfo_c50": ("/info.php", "php", "-n 1000 -c 50", "PHP phpinfo() page"),
    "ab_php_hello_k": ("/hello.php", "php", "-k -n 1000 -c 100", "PHP 'hello world'"),
    "ab_page_k": ("/663.html", None, "-k -n 10000 -c 100", "663-byte page"),
    "ab_app_c500": ("/app/slow", "http", "-k -n 20000 -c 500", f"/app/ proxied to a {SLOW_BACKEND_MS} ms back end"),
    "ab_app_c1000": ("/app/slow", "http", "-k -n 20000 -c 1000", f"/app/ proxied to a {SLOW_BACKEND_MS} ms back end"),
}
for _name, (_path, _backend, _ab, _what) in AB_POSTS.items():
    _args = _ab.split()
    _sc = dict(path=_path, conns=int(_args[_args.index("-c") + 1]), close="-k" not in _args,
               length=None if _path == "/info.php" else FILES.get(_path.lstrip("/"), len(HELLO_BODY)),
               client="ab", ab_args=_args, quick=True, desc=f"ab {_ab}: {_what} (Peregrine in quick mode)")
    if _backend:
        _sc["backend"] = _backend
    if _path == "/info.php":
        _sc["min_length"] = 10_000
    elif _path in ("/hello.php", "/app/slow"):
        _sc["expect"] = HELLO_BODY
    SCENARIOS[_name] = _sc
SCENARIO_ORDER = list(SCENARIOS)
TLS_SCENARIOS = [n for n in SCENARIO_ORDER if SCENARIOS[n].get("tls")]
# Issue 19's rows (the io_uring backend against epoll and the canned-epoll floor).
URING_SCENARIOS = ["small", "page", "c1000", "small_c1000", "small_c5", "small_c10", "php_hello", "proxy_small"]
SCENARIO_ALIASES = {"proxy_slow": [f"proxy_slow{c}" for c in SLOW_CONCURRENCIES], "tls": TLS_SCENARIOS,
                    "ab": list(AB_POSTS), "uring": URING_SCENARIOS}
# The targets for Peregrine (CPU per request against the best of nginx, H2O and lighttpd;
# h2_php_hello against nginx alone).
TARGETS = {n: ("best", 0.9) for n in TLS_SCENARIOS if n != "tls_idle10k"}
TARGETS["h2_php_hello"] = ("nginx", 0.7)
# The posts' rows guard against regressions: CPU per request at most 0.7x nginx's, and req/s at
# least nginx's (report.target_lines checks both).
TARGETS.update({n: ("nginx", 0.7) for n in AB_POSTS})
RPS_AT_LEAST_NGINX = set(AB_POSTS)
PHP_FPM_CHILDREN = 8
AB_REQUESTS = 10_000
AB_CONCURRENCY = 100


def make_docroot(path):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "11.txt"), "wb") as f:
        f.write(b"0123456789\n")
    head = b"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Peregrine bench</title></head>\n<body>\n"
    foot = b"</body></html>\n"
    filler = b"<p>" + b"Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 10
    page = head + filler
    page = page[:663 - len(foot) - len(b"</p>\n")] + b"</p>\n" + foot
    assert len(page) == 663, len(page)
    with open(os.path.join(path, "663.html"), "wb") as f:
        f.write(page)
    with open(os.path.join(path, "135555.bin"), "wb") as f:
        f.write(random.Random(135555).randbytes(135_555))
    for name, size in FILES.items():
        assert os.path.getsize(os.path.join(path, name)) == size, name
    for name, text in PHP_SCRIPTS.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)


def check_paths_for(scenario_names):
    paths = []
    seen = set()
    for n in scenario_names:
        sc = SCENARIOS[n]
        if sc["path"] not in seen:
            seen.add(sc["path"])
            expect = HELLO_BODY if n == "hello" else sc.get("expect")
            paths.append((sc["path"], sc["length"], expect, sc.get("min_length", 0)))
    return paths
