"""libperegrine as an installed package (issue 20, item 6): `cmake --install` of the build tree the
tests run from into a temporary prefix, then a small application outside the source tree, built
once with find_package(peregrine) and once with pkg-config, serving HTTP on an ephemeral port.

The install is from the configured build tree of PEREGRINE_BIN (built again first, a no-op when
up to date): configuring and building a second tree would compile the whole library twice.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import PEREGRINE_BIN, ServerTestCase, main, require_tool

BUILD_DIR = os.path.dirname(os.path.abspath(PEREGRINE_BIN))

# The application: every request gets a fixed answer naming its path, so that the test can tell
# this program's answer from anything else on the port.
APP_MAIN = r"""
#include <cstring>
#include <string>

#include "peregrine/server.h"

int main(int argc, char** argv) {
  peregrine::Server server;
  server.listen(argc > 2 && std::strcmp(argv[1], "--listen") == 0 ? argv[2] : "127.0.0.1:0")
      .workers(1)
      .route("/", [](const peregrine::Request& request, peregrine::Response& response) {
        response.set_content_type("text/plain");
        response.set_body("installed app: " + std::string(request.path));
      });
  return server.run();
}
"""

APP_CMAKE = """
cmake_minimum_required(VERSION 3.25)
project(installed_app LANGUAGES CXX)
find_package(peregrine 0.1 REQUIRED)
add_executable(app main.cc)
target_link_libraries(app PRIVATE peregrine::peregrine)
"""


def run(argv, **kwargs):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=900, **kwargs)
    if r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}\n--- stdout ---\n{r.stdout[-4000:]}"
                             f"\n--- stderr ---\n{r.stderr[-4000:]}")
    return r.stdout


class InstalledLibraryTest(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(os.path.join(BUILD_DIR, "CMakeCache.txt")):
            raise unittest.SkipTest(f"{BUILD_DIR} is no CMake build tree")
        cls.cmake = require_tool("cmake", "cmake")
        cls.pkg_config = require_tool("pkg-config", "pkg-config")
        cls.work = tempfile.mkdtemp(prefix="peregrine-install-")
        cls.prefix = os.path.join(cls.work, "prefix")
        run([cls.cmake, "--build", BUILD_DIR, "--target", "peregrine_core", "peregrine"])
        run([cls.cmake, "--install", BUILD_DIR, "--prefix", cls.prefix])
        cls.app_src = os.path.join(cls.work, "app")
        os.makedirs(cls.app_src)
        with open(os.path.join(cls.app_src, "main.cc"), "w") as f:
            f.write(APP_MAIN)
        with open(os.path.join(cls.app_src, "CMakeLists.txt"), "w") as f:
            f.write(APP_CMAKE)
        # Whatever compiler built the library builds the application.
        with open(os.path.join(BUILD_DIR, "CMakeCache.txt")) as f:
            m = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", f.read(), re.M)
        cls.cxx = m.group(1) if m else "c++"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, True)

    def pc_env(self):
        env = dict(os.environ)
        env["PKG_CONFIG_PATH"] = os.path.join(self.prefix, "lib", "pkgconfig")
        return env

    def serve_and_ask(self, binary):
        srv = self.start_argv([binary, "--listen", "127.0.0.1:0"], name="app")
        status, headers, body = self.get(srv.port, "/hello")
        self.assertEqual((status, body), (200, b"installed app: /hello"))
        self.assertEqual(headers["Content-Type"], "text/plain")
        self.stop_ok(srv)

    def test_layout(self):
        p = self.prefix
        for rel in ("lib/libperegrine.a", "include/peregrine/server.h", "include/peregrine/handler.h",
                    "lib/cmake/peregrine/peregrineConfig.cmake",
                    "lib/cmake/peregrine/peregrineConfigVersion.cmake",
                    "lib/cmake/peregrine/peregrineTargets.cmake", "lib/pkgconfig/peregrine.pc",
                    "sbin/peregrine"):
            self.assertTrue(os.path.exists(os.path.join(p, rel)), rel)
        self.assertTrue(os.access(os.path.join(p, "sbin/peregrine"), os.X_OK))
        # The public headers stand alone: each includes only system headers and its siblings.
        include = os.path.join(p, "include")
        for name in os.listdir(os.path.join(include, "peregrine")):
            with open(os.path.join(include, "peregrine", name)) as f:
                for quoted in re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M):
                    self.assertTrue(os.path.exists(os.path.join(include, quoted)),
                                    f"peregrine/{name} includes {quoted}, which is not installed")

    def test_the_load_generator_stays_out_of_the_library(self):
        # peregrine-bench's own code (src/loadgen/) is its own archive, linked by the program and
        # its tests only: embedders get the server.
        nm = require_tool("nm", "binutils")
        symbols = run([nm, "-C", "--defined-only", os.path.join(self.prefix, "lib/libperegrine.a")])
        self.assertIn("peregrine::Server::", symbols)
        for namespace in ("peregrine::loadgen::", "peregrine::bench::"):
            self.assertNotIn(namespace, symbols)
        self.assertFalse(os.path.exists(os.path.join(self.prefix, "lib/libperegrine_loadgen.a")))

    def test_pkg_config_metadata(self):
        env = self.pc_env()
        self.assertEqual(run([self.pkg_config, "--modversion", "peregrine"], env=env).strip(),
                         "0.1.0")
        shared = run([self.pkg_config, "--libs", "peregrine"], env=env).split()
        self.assertIn("-lperegrine", shared)
        self.assertNotIn("-lssl", shared)  # the dependencies are private: --static lists them
        static = run([self.pkg_config, "--libs", "--static", "peregrine"], env=env).split()
        for lib in ("-lperegrine", "-lssl", "-lcrypto", "-lz", "-lbrotlienc", "-lzstd",
                    "-lcrypt", "-lsystemd", "-lpcre2-8"):
            self.assertIn(lib, static)
        cflags = run([self.pkg_config, "--cflags", "peregrine"], env=env).split()
        self.assertIn("-I" + os.path.join(self.prefix, "lib/pkgconfig/../../include"), cflags)

    def test_find_package_build(self):
        build = os.path.join(self.tmp, "build-cmake")
        run([self.cmake, "-S", self.app_src, "-B", build, "-G", "Ninja",
             f"-DCMAKE_PREFIX_PATH={self.prefix}", f"-DCMAKE_CXX_COMPILER={self.cxx}"])
        run([self.cmake, "--build", build])
        self.serve_and_ask(os.path.join(build, "app"))

    def test_find_package_refuses_a_newer_minor(self):
        # SameMinorVersion: before 1.0 a minor release may change the API.
        with open(os.path.join(self.tmp, "CMakeLists.txt"), "w") as f:
            f.write(APP_CMAKE.replace("find_package(peregrine 0.1", "find_package(peregrine 0.2"))
        shutil.copy(os.path.join(self.app_src, "main.cc"), self.tmp)
        r = subprocess.run([self.cmake, "-S", self.tmp, "-B", os.path.join(self.tmp, "b"),
                            "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={self.prefix}"],
                           capture_output=True, text=True, timeout=300)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("0.1.0", r.stderr)

    def test_pkg_config_build(self):
        env = self.pc_env()
        flags = run([self.pkg_config, "--cflags", "--libs", "--static", "peregrine"], env=env).split()
        app = os.path.join(self.tmp, "app-pc")
        run([self.cxx, "-std=c++20", "-O1", os.path.join(self.app_src, "main.cc"), "-o", app]
            + flags)
        self.serve_and_ask(app)


if __name__ == "__main__":
    main()
