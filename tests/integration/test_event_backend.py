"""The event backend chosen at start (docs/io_uring.md). The default, epoll, never tries io_uring;
`auto` uses io_uring and says so, and where io_uring_setup is refused, as a container's seccomp
profile refuses it (here a filter of our own, python3-seccomp), epoll with one warning that says
why, serving as before; `io_uring` asked for by name there refuses to start.
"""
import http.client
import subprocess

from harness import PEREGRINE_BIN, ServerTestCase, main, make_config, missing

# Debian's python3-seccomp is a module of the system's python3.
SYSTEM_PYTHON = "/usr/bin/python3"
# Runs argv[2:] with io_uring_setup refused (EPERM) when argv[1] is "refuse", as is otherwise.
EXEC_UNDER_FILTER = """
import errno, os, sys
if sys.argv[1] == "refuse":
    import seccomp
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    f.add_rule(seccomp.ERRNO(errno.EPERM), "io_uring_setup")
    f.load()
os.execv(sys.argv[2], sys.argv[2:])
"""
FALLBACK = ('event_backend = "auto": using epoll, io_uring is unavailable: io_uring_setup: Operation not '
            "permitted (kernel.io_uring_disabled, or a seccomp filter such as a container's)")


def seccomp_available():
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import seccomp"], capture_output=True)
    if probe.returncode == 0:
        return
    missing("missing module: seccomp (python3-seccomp)")


class EventBackendTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        seccomp_available()
        self.root = self.make_root({"index.html": "hello\n"})

    def argv(self, io_uring, backend=None):
        # Through the wrapper, so that the harness's PEREGRINE_EVENT_BACKEND (the tier's backend)
        # does not decide what is being tested.
        argv = [SYSTEM_PYTHON, "-c", EXEC_UNDER_FILTER, "allow" if io_uring else "refuse", PEREGRINE_BIN,
                "--listen", "127.0.0.1:0", "--root", self.root, "--workers", "2", "--access-log", "off"]
        return argv + (["--event-backend", backend] if backend else [])

    def serves(self, srv):
        status, _, body = self.get(srv.port, "/index.html")
        self.assertEqual((status, body), (200, b"hello\n"))

    def test_the_default_is_epoll_and_does_not_try_io_uring(self):
        srv = self.start_argv(self.argv(io_uring=False))
        self.serves(srv)
        self.assertIn("event backend: epoll (batch wait 100 us)", srv.stderr())
        self.assertNotIn("unavailable", srv.stderr())

    def test_auto_uses_io_uring_where_the_kernel_allows_it(self):
        srv = self.start_argv(self.argv(io_uring=True, backend="auto"))
        self.serves(srv)
        self.assertIn("event backend: io_uring (batch wait 100 us)", srv.stderr())
        self.assertNotIn("unavailable", srv.stderr())

    def test_the_batch_wait_can_be_turned_off(self):
        for backend in ("epoll", "io_uring"):
            with self.subTest(backend=backend):
                path = self.write_config(make_config(self.root, top=f'event_backend = "{backend}"\nbatch_wait_us = 0'))
                # Through the wrapper, for the tier's --event-backend not to replace the file's.
                srv = self.start_argv([SYSTEM_PYTHON, "-c", EXEC_UNDER_FILTER, "allow", PEREGRINE_BIN, "-c", path])
                for _ in range(20):
                    self.serves(srv)
                self.assertIn(f"event backend: {backend} (batch wait off)", srv.stderr())
                srv.stop()

    def test_auto_falls_back_to_epoll_with_one_line(self):
        srv = self.start_argv(self.argv(io_uring=False, backend="auto"))
        self.serves(srv)
        log = srv.stderr()
        self.assertEqual(log.count(FALLBACK), 1, log)
        self.assertNotIn("event backend: io_uring", log)

    def test_io_uring_by_name_refuses_to_start_without_it(self):
        run = subprocess.run(self.argv(io_uring=False, backend="io_uring"), capture_output=True, text=True,
                             timeout=10)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn('event_backend = "io_uring": io_uring is unavailable here: io_uring_setup: Operation not '
                      "permitted", run.stderr)
        self.assertIn('hint: set event_backend = "auto" to fall back to epoll', run.stderr)
        self.assertNotIn("listening on", run.stderr)

    def test_io_uring_sends_a_proxied_answer_with_its_wait(self):
        # An exchange's answer goes out through the ring like a static file's (docs/io_uring.md,
        # "Sending through the ring"): the front's only send(2) per request is the one to the
        # back end. Counted with strace attached to every thread of the running front.
        back = self.start_argv([PEREGRINE_BIN, "--listen", "127.0.0.1:0", "--root", self.root, "--workers", "1",
                                "--access-log", "off"], name="back")
        front = self.start_argv([SYSTEM_PYTHON, "-c", EXEC_UNDER_FILTER, "allow", PEREGRINE_BIN, "--listen",
                                 "127.0.0.1:0", "--proxy", f"http://127.0.0.1:{back.port}", "--workers", "1",
                                 "--access-log", "off", "--event-backend", "io_uring"], name="front")
        conn = http.client.HTTPConnection("127.0.0.1", front.port, timeout=10)

        def get():
            conn.request("GET", "/index.html")
            response = conn.getresponse()
            self.assertEqual((response.status, response.read()), (200, b"hello\n"))

        requests = 100
        counts, tail = self.count_syscalls(front.pid, ("sendto", "sendmsg", "write", "writev"), "sendto", get,
                                           requests)
        sends = sum(counts.values())
        # One per request to the back end; the answers to the client would make it 2 per request.
        self.assertGreaterEqual(sends, requests, tail)
        self.assertLess(sends, requests * 1.2, tail)


if __name__ == "__main__":
    main()
