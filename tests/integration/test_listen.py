"""Listening: an address another process listens on is a start-up error (every worker binds
with SO_REUSEPORT, which would otherwise let a second server silently take half the
connections); unix sockets with mode, stale-file removal and refusal of a live one; IPv6."""

import os
import socket
import stat
import subprocess
import unittest

from harness import PEREGRINE_BIN, ServerTestCase, main, make_config, q


def has_ipv6_loopback():
    try:
        with open("/proc/net/if_inet6") as f:
            return any(line.split()[0] == "0" * 31 + "1" for line in f)
    except FileNotFoundError:
        return False


class AddressInUseTest(ServerTestCase):
    def start_second(self, listen, root):
        """Runs a second server on `listen`; it must exit on its own. Returns (status, stderr)."""
        text = make_config(root, workers=2).replace('listen = ["127.0.0.1:0"]',
                                                    f"listen = [{q(listen)}]")
        path = self.write_config(text, "second.toml")
        proc = subprocess.run([PEREGRINE_BIN, "-c", path], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=20)
        return proc.returncode, proc.stderr.decode()

    def test_second_server_on_the_same_address_is_refused(self):
        a = self.make_root({"who": b"A"}, name="a")
        b = self.make_root({"who": b"B"}, name="b")
        srv = self.start_config(make_config(a, workers=2))
        for listen in (f"127.0.0.1:{srv.port}", f"*:{srv.port}", f"localhost:{srv.port}"):
            status, err = self.start_second(listen, b)
            self.assertNotEqual(status, 0, err)
            self.assertIn("address already in use", err)
            self.assertNotIn("peregrine started", err)
        answers = [self.get(srv.port, "/who")[2] for _ in range(40)]
        self.assertEqual(set(answers), {b"A"})

    def test_foreign_listener_without_reuseport(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        self.addCleanup(s.close)
        status, err = self.start_second(f"127.0.0.1:{s.getsockname()[1]}", self.make_root())
        self.assertNotEqual(status, 0)
        self.assertIn("Address already in use", err)


    @unittest.skipUnless(socket.has_ipv6 and has_ipv6_loopback(), "no IPv6 loopback")
    def test_dual_stack_listener_of_another_process_is_found_across_families(self):
        # A [::] socket with v6only off takes IPv4 connections too; with SO_REUSEPORT on both
        # sides the kernel lets 127.0.0.1 bind beside it, so only the listener check stops it.
        s = socket.socket(socket.AF_INET6)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", 0))
        s.listen()
        self.addCleanup(s.close)
        status, err = self.start_second(f"127.0.0.1:{s.getsockname()[1]}", self.make_root())
        self.assertNotEqual(status, 0, err)
        self.assertIn("address already in use", err)
        # The same port with v6only on is another address family's business: it starts.
        v6only = socket.socket(socket.AF_INET6)
        v6only.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        v6only.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        v6only.bind(("::1", 0))
        v6only.listen()
        self.addCleanup(v6only.close)
        root = self.make_root({"who": b"A"})
        text = make_config(root).replace('listen = ["127.0.0.1:0"]',
                                         f'listen = ["127.0.0.1:{v6only.getsockname()[1]}"]')
        srv = self.start_config(text)
        self.assertEqual(self.get(srv.port, "/who")[2], b"A")


class UnixSocketTest(ServerTestCase):
    def start_unix(self, entry):
        root = self.make_root({"hello.txt": b"hello\n"})
        text = make_config(root, workers=2).replace(
            'listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:0", {entry}]')
        return self.start_config(text)

    def start_unix_and_wait(self, entry, path):
        srv = self.start_unix(entry)
        # The harness returns at the TCP line; the unix socket is bound just after it.
        self.wait_for(lambda: f"listening on unix:{path}" in srv.stderr(), msg="the unix line")
        return srv

    def curl(self, path, url="http://localhost/hello.txt"):
        return subprocess.run(["curl", "-sS", "--unix-socket", path, url], capture_output=True,
                              timeout=10)

    def test_serves_with_mode_and_removes_the_file_at_stop(self):
        path = os.path.join(self.tmp, "p.sock")
        srv = self.start_unix_and_wait(f'{{ address = {q("unix:" + path)}, mode = "0660" }}', path)
        st = os.stat(path)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        for _ in range(10):  # both workers' descriptors serve
            r = self.curl(path)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, b"hello\n")
        self.stop_ok(srv)
        self.assertFalse(os.path.exists(path), "the socket file outlived the server")

    def test_a_unix_client_is_unix_colon_in_the_access_log(self):
        # As nginx's $remote_addr: "unix:" (FastCGI's REMOTE_ADDR and X-Forwarded-For too).
        path = os.path.join(self.tmp, "log.sock")
        log = os.path.join(self.tmp, "access.log")
        root = self.make_root({"hello.txt": b"hello\n"})
        text = make_config(root, access_log=log).replace(
            'listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:0", {q("unix:" + path)}]')
        srv = self.start_config(text)
        self.wait_for(lambda: f"listening on unix:{path}" in srv.stderr(), msg="the unix line")
        self.assertEqual(self.curl(path).stdout, b"hello\n")
        self.get(srv.port, "/hello.txt")

        def lines():
            with open(log) as f:
                return f.read().splitlines()
        self.wait_for(lambda: os.path.exists(log) and len(lines()) == 2, msg="two log lines")
        self.assertTrue(lines()[0].startswith('unix: - - ['), lines()[0])
        self.assertTrue(lines()[1].startswith('127.0.0.1 - - ['), lines()[1])

    def test_stale_socket_file_is_replaced(self):
        path = os.path.join(self.tmp, "stale.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.close()  # the file stays, nobody listens: what a crash leaves
        srv = self.start_unix_and_wait(q("unix:" + path), path)
        self.wait_for(lambda: "removing stale socket file" in srv.stderr(), msg="the removal")
        self.assertEqual(self.curl(path).stdout, b"hello\n")

    def test_live_socket_is_refused(self):
        path = os.path.join(self.tmp, "live.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen()
        self.addCleanup(s.close)
        root = self.make_root()
        config = self.write_config(make_config(root).replace(
            'listen = ["127.0.0.1:0"]', f'listen = [{q("unix:" + path)}]'))
        proc = subprocess.run([PEREGRINE_BIN, "-c", config], capture_output=True, timeout=20)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(b"address already in use", proc.stderr)
        self.assertTrue(os.path.exists(path), "a live socket's file was removed")

    def test_mode_on_a_tcp_address_is_an_error(self):
        config = self.write_config(make_config(self.make_root()).replace(
            'listen = ["127.0.0.1:0"]', 'listen = [{ address = "127.0.0.1:0", mode = "0660" }]'))
        proc = subprocess.run([PEREGRINE_BIN, "-t", "-c", config], capture_output=True, timeout=20)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(b"apply only to unix: listen addresses", proc.stderr)


@unittest.skipUnless(has_ipv6_loopback(), "the kernel has no IPv6 address on lo (::1)")
class Ipv6Test(ServerTestCase):
    def test_serves_over_ipv6_loopback(self):
        root = self.make_root({"hello.txt": b"hello\n"})
        log = os.path.join(self.tmp, "access.log")
        text = make_config(root, workers=2, access_log=log).replace(
            'listen = ["127.0.0.1:0"]', 'listen = ["127.0.0.1:0", "[::1]:0"]')
        srv = self.start_config(text)
        port = srv.listening_port("[::1]")
        for _ in range(5):
            with socket.create_connection(("::1", port), timeout=5) as s:
                s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
            self.assertTrue(data.startswith(b"HTTP/1.1 200 "), data)
            self.assertTrue(data.endswith(b"\r\n\r\nhello\n"), data)
        r = subprocess.run(["curl", "-sS", "-g", f"http://[::1]:{port}/hello.txt"],
                           capture_output=True, timeout=10)
        self.assertEqual(r.stdout, b"hello\n", r.stderr)
        self.stop_ok(srv)
        with open(log) as f:
            self.assertEqual([line.split()[0] for line in f], ["::1"] * 6)


if __name__ == "__main__":
    main()
