"""No request reads outside the site root: dot segments (plain, percent-encoded, mixed), encoded
slashes, absolute-form targets, symlinks leaving the root; dotfiles are refused except
/.well-known/."""

import os

from harness import RawClient, ServerTestCase, main, make_config

SECRET = b"TOPSECRET-outside-the-root\n"

FILES = {
    "hello.txt": b"hello\n",
    "dir/a.txt": b"dir a\n",
    "dir/sub/b.txt": b"dir sub b\n",
    ".env": b"DB_PASSWORD=hunter2\n",
    ".git/config": b"[core]\n",
    "dir/.hidden": b"hidden\n",
    ".well-known/acme-challenge/token": b"acme-token\n",
    ".well-known/security.txt": b"Contact: mailto:x@example.com\n",
}

TRAVERSALS = [
    "/../secret.txt",
    "/../../../../../../etc/passwd",
    "/dir/../../secret.txt",
    "/dir/sub/../../../secret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/.%2e/secret.txt",
    "/%2e./secret.txt",
    "/..%2fsecret.txt",
    "/..%2Fsecret.txt",
    "/%2e%2e%2fsecret.txt",
    "/%2e%2e%2Fsecret.txt",
    "/dir/..%2f..%2fsecret.txt",
    "/dir/%2e%2e/%2e%2e/secret.txt",
    "/dir%2f..%2f..%2fsecret.txt",
    "/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/..%5csecret.txt",
    "/..\\secret.txt",
    "/dir/..\\..\\secret.txt",
    "//../secret.txt",
    "/./../secret.txt",
    "/dir/./../../secret.txt",
    "/..;/secret.txt",
    "/%252e%252e/secret.txt",
    "/..%00/secret.txt",
    "/secret.txt%00.txt",
    "/%c0%ae%c0%ae/secret.txt",
    "/outside/secret.txt",
    "/%2e%2e/outside/secret.txt",
    "/..%2foutside%2fsecret.txt",
]


class TraversalTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        base = os.path.join(self.tmp, "site")
        os.makedirs(os.path.join(base, "outside"))
        with open(os.path.join(base, "secret.txt"), "wb") as f:
            f.write(SECRET)
        with open(os.path.join(base, "outside", "secret.txt"), "wb") as f:
            f.write(SECRET)
        self.root = self.make_root(FILES, name="site/root")
        self.srv = self.start_config(make_config(self.root))

    def fetch_raw(self, target, host="localhost"):
        c = RawClient(self.srv.port)
        try:
            c.send(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("latin-1"))
            return c.read_response()
        finally:
            c.close()

    def assert_refused(self, target, host="localhost"):
        r = self.fetch_raw(target, host)
        self.assertNotIn(b"TOPSECRET", r.body, f"GET {target}: read a file outside the root")
        self.assertNotIn(b"root:", r.body, f"GET {target}: read /etc/passwd")
        self.assertIn(r.status, (400, 403, 404), f"GET {target}: {r}")

    def test_traversal_origin_form(self):
        for target in TRAVERSALS:
            with self.subTest(target=target):
                self.assert_refused(target)
        self.assert_serving(self.srv)

    def test_traversal_absolute_form(self):
        for target in TRAVERSALS:
            for authority in ("localhost", "localhost:80", "127.0.0.1"):
                with self.subTest(target=target, authority=authority):
                    self.assert_refused(f"http://{authority}{target}")
        for target in ("http://localhost/../secret.txt", "http://../secret.txt", "http://localhost..//secret.txt",
                       "http://localhost%2f..%2fsecret.txt/", "http://localhost/%2e%2e%2fsecret.txt"):
            with self.subTest(target=target):
                self.assert_refused(target)

    def test_traversal_with_http_client_and_curl(self):
        import subprocess
        for target in ("/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt"):
            status, _, body = self.get(self.srv.port, target)
            self.assertNotIn(b"TOPSECRET", body)
            self.assertIn(status, (400, 403, 404), target)
            r = subprocess.run(["curl", "-s", "--path-as-is", f"http://127.0.0.1:{self.srv.port}{target}"],
                               capture_output=True, timeout=20)
            self.assertNotIn(b"TOPSECRET", r.stdout, target)

    def test_dot_segments_inside_root_resolve(self):
        for target, body in (("/dir/../hello.txt", b"hello\n"), ("/./hello.txt", b"hello\n"),
                             ("/dir/./a.txt", b"dir a\n"), ("/dir/sub/../a.txt", b"dir a\n"),
                             ("/dir/%2e%2e/hello.txt", b"hello\n"), ("/dir//a.txt", b"dir a\n"),
                             ("/dir/sub/./../../hello.txt", b"hello\n")):
            r = self.fetch_raw(target)
            self.assertEqual((r.status, r.body), (200, body), f"GET {target}: {r}")

    def test_dotfiles_denied(self):
        for target in ("/.env", "/.git/config", "/.git/", "/dir/.hidden", "/%2eenv", "/dir/%2Ehidden",
                       "/.well-known/../.env", "/dir/../.env"):
            with self.subTest(target=target):
                r = self.fetch_raw(target)
                self.assertEqual(r.status, 403, f"GET {target}: {r}")
                self.assertNotIn(b"hunter2", r.body)
                self.assertNotIn(b"[core]", r.body)

    def test_well_known_allowed(self):
        for target, body in (("/.well-known/acme-challenge/token", b"acme-token\n"),
                             ("/.well-known/security.txt", FILES[".well-known/security.txt"])):
            r = self.fetch_raw(target)
            self.assertEqual((r.status, r.body), (200, body), f"GET {target}: {r}")


class DotfilesAllowedTest(ServerTestCase):
    def test_dotfiles_true(self):
        root = self.make_root(FILES)
        srv = self.start_config(make_config(root, site="dotfiles = true"))
        self.assertEqual(self.get(srv.port, "/.env")[::2], (200, b"DB_PASSWORD=hunter2\n"))
        self.assertEqual(self.get(srv.port, "/dir/.hidden")[::2], (200, b"hidden\n"))


class SymlinkTest(ServerTestCase):
    def setup_tree(self):
        base = os.path.join(self.tmp, "site")
        outside = os.path.join(base, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "secret.txt"), "wb") as f:
            f.write(SECRET)
        root = self.make_root({"hello.txt": b"hello\n", "dir/a.txt": b"dir a\n"}, name="site/root")
        os.symlink("../outside/secret.txt", os.path.join(root, "link_out.txt"))
        os.symlink(os.path.join(outside, "secret.txt"), os.path.join(root, "abs_link_out.txt"))
        os.symlink("../outside", os.path.join(root, "link_dir_out"))
        os.symlink("/etc/passwd", os.path.join(root, "passwd.txt"))
        os.symlink("hello.txt", os.path.join(root, "link_in.txt"))
        os.symlink("dir", os.path.join(root, "link_dir_in"))
        os.symlink("dir/../hello.txt", os.path.join(root, "link_in_dotdot.txt"))
        return root

    def test_symlinks_outside_refused_by_default(self):
        root = self.setup_tree()
        srv = self.start_config(make_config(root))
        for target in ("/link_out.txt", "/abs_link_out.txt", "/link_dir_out/secret.txt", "/passwd.txt",
                       "/link_dir_out/", "/link_dir_in/../link_out.txt"):
            with self.subTest(target=target):
                status, _, body = self.get(srv.port, target)
                self.assertNotIn(b"TOPSECRET", body, target)
                self.assertNotIn(b"root:", body, target)
                self.assertIn(status, (403, 404), target)

    def test_symlinks_inside_allowed(self):
        root = self.setup_tree()
        srv = self.start_config(make_config(root))
        self.assertEqual(self.get(srv.port, "/link_in.txt")[::2], (200, b"hello\n"))
        self.assertEqual(self.get(srv.port, "/link_dir_in/a.txt")[::2], (200, b"dir a\n"))
        self.assertEqual(self.get(srv.port, "/link_in_dotdot.txt")[::2], (200, b"hello\n"))

    def test_symlinks_outside_allowed_when_configured(self):
        root = self.setup_tree()
        srv = self.start_config(make_config(root, site="symlinks_outside_root = true"))
        self.assertEqual(self.get(srv.port, "/link_out.txt")[::2], (200, SECRET))
        self.assertEqual(self.get(srv.port, "/link_dir_out/secret.txt")[::2], (200, SECRET))
        # Still no escape through the URL itself.
        status, _, body = self.get(srv.port, "/../outside/secret.txt")
        self.assertNotIn(b"TOPSECRET", body)

    def test_symlink_swapped_after_first_request(self):
        # A file served once, then replaced by a symlink to outside: the cache must not let it
        # through once the change is noticed.
        root = self.setup_tree()
        target = os.path.join(root, "swap.txt")
        with open(target, "wb") as f:
            f.write(b"innocent\n")
        srv = self.start_config(make_config(root))
        self.assertEqual(self.get(srv.port, "/swap.txt")[::2], (200, b"innocent\n"))
        os.unlink(target)
        os.symlink("../outside/secret.txt", target)
        import time
        time.sleep(1.2)
        status, _, body = self.get(srv.port, "/swap.txt")
        self.assertNotIn(b"TOPSECRET", body)
        self.assertIn(status, (403, 404))


if __name__ == "__main__":
    main()
