"""scripts/run-tests.sh's count, end to end: a tiny CTest project with a passing test, a failing
one, a GoogleTest-style skip by design and integration-style files (through harness.py) with a
skip by design and a missing tool, run by the real runner with and without CI=true.

Run: /usr/bin/python3 tests/integration/test_run_tests.py [-v]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

RUNNER = os.path.join(harness.REPO, "scripts", "run-tests.sh")
SUMMARY = os.path.join(harness.REPO, "scripts", "ctest-summary.py")
sys.path.insert(0, os.path.dirname(SUMMARY))
ctest_summary = __import__("ctest-summary")

# Two cases pass, one is skipped by design.
PASSING_FILE = '''
import unittest, harness
class T(unittest.TestCase):
    def test_one(self): pass
    def test_two(self): pass
    @unittest.skipUnless(False, "needs root to switch users")
    def test_as_root(self): pass
harness.main()
'''
# One case passes, one needs a tool no machine has.
MISSING_TOOL_FILE = '''
import unittest, harness
class T(unittest.TestCase):
    def test_plain(self): pass
    def test_with_tool(self): harness.require_tool("peregrine-no-such-tool", "Debian package none")
harness.main()
'''
# Every case skipped by design: the file is CTest's "Skipped", one case counted.
ALL_SKIPPED_FILE = '''
import unittest, harness
@unittest.skipUnless(False, "no IPv6 loopback")
class T(unittest.TestCase):
    def test_v6(self): pass
harness.main()
'''

CMAKE = '''cmake_minimum_required(VERSION 3.25)
project(runner_test NONE)
enable_testing()
add_test(NAME plain.pass COMMAND sh -c "exit 0")
add_test(NAME plain.fail COMMAND sh -c "echo broken; exit 1")
# A CTest test that says it skipped in its output (a skip by design).
add_test(NAME unit.Spares.Recycles COMMAND sh -c "echo '[  SKIPPED ] AddressSanitizer build'")
set_tests_properties(unit.Spares.Recycles PROPERTIES SKIP_REGULAR_EXPRESSION "\\\\[  SKIPPED \\\\]")
# The stand-in CMakeLists.txt registers when clang-format is missing.
add_test(NAME style.clang_format COMMAND sh -c
  "echo 'missing tool: clang-format (Debian package clang-format)'; case \\"$CI\\" in true|1) exit 1;; esac; exit 77")
set_tests_properties(style.clang_format PROPERTIES SKIP_RETURN_CODE 77)
foreach(name passing missing_tool all_skipped)
  add_test(NAME integration.${name} COMMAND %(python)s %(dir)s/${name}.py)
  set_tests_properties(integration.${name} PROPERTIES
    ENVIRONMENT "PYTHONPATH=%(harness)s;PEREGRINE_CTEST_NAME=integration.${name}"
    SKIP_RETURN_CODE 77)
endforeach()
'''


class UnitTestOutcomes(unittest.TestCase):
    """The GoogleTest binary, run as CTest's shards, writes each case's outcome (tests/unit/main.cc)
    where the runner reads an integration file's."""

    def test_each_case_of_a_shard_is_written_for_the_runner(self):
        unit_tests = os.path.join(os.path.dirname(harness.PEREGRINE_BIN), "unit_tests")
        if not os.path.exists(unit_tests):
            self.skipTest(f"no unit_tests beside {harness.PEREGRINE_BIN} (built with PEREGRINE_TESTS=OFF)")
        with tempfile.TemporaryDirectory() as results:
            env = dict(os.environ, PEREGRINE_TEST_RESULTS=results, PEREGRINE_CTEST_NAME="unit.shard1of2",
                       GTEST_TOTAL_SHARDS="2", GTEST_SHARD_INDEX="0")
            p = subprocess.run([unit_tests, "--gtest_filter=HpackDecoder.*"], env=env,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout[-2000:])
            with open(os.path.join(results, "unit.shard1of2.tsv")) as f:
                rows = [line.split("\t") for line in f.read().splitlines()]
        ran = [line.split("] ", 1)[1].split(" (")[0] for line in p.stdout.splitlines()
               if line.startswith("[       OK ]")]
        self.assertGreater(len(ran), 2, p.stdout[-2000:])
        # Every case this shard ran, and only those, in order; the other shard runs the rest.
        self.assertEqual([name for _, name, _ in rows], ran)
        self.assertEqual({status for status, _, _ in rows}, {"passed"})


class RunnerCount(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_tool("cmake", "Debian package cmake")
        cls.tmp = tempfile.mkdtemp(prefix="peregrine-runner-")
        src, cls.build = os.path.join(cls.tmp, "src"), os.path.join(cls.tmp, "build")
        harness.write_tree(src, {"passing.py": PASSING_FILE, "missing_tool.py": MISSING_TOOL_FILE,
                                 "all_skipped.py": ALL_SKIPPED_FILE,
                                 "CMakeLists.txt": CMAKE % {"python": sys.executable, "dir": src,
                                                            "harness": HERE}})
        # Ninja, as the project's own build: a fresh machine has no make (install-deps.sh
        # installs ninja-build), and cmake's default generator would want it.
        harness.require_tool("ninja", "Debian package ninja-build")
        subprocess.run(["cmake", "-G", "Ninja", "-S", src, "-B", cls.build], check=True,
                       stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def run_runner(self, ci):
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "PEREGRINE_TEST_RESULTS")}
        if ci:
            env["CI"] = "true"
        p = subprocess.run(["bash", RUNNER, "--ctest-dir", self.build], env=env, capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout.splitlines()

    @staticmethod
    def shown(lines):
        # Indented: the outer runner must not read the inner CTest's result lines as its own.
        return "\n".join("| " + line for line in lines)

    def test_without_ci_a_missing_tool_is_a_skip(self):
        rc, lines = self.run_runner(ci=False)
        # passed: plain.pass, passing x2, missing_tool.test_plain; failed: plain.fail; skipped: the
        # GoogleTest skip, clang-format, passing.test_as_root, missing_tool.test_with_tool, all_skipped.
        self.assertEqual(lines[-1], "4 passed, 1 failed, 5 skipped", self.shown(lines))
        self.assertEqual(rc, 1)
        self.assertIn("  skipped: integration.missing_tool: T.test_with_tool "
                      "(missing tool: peregrine-no-such-tool (Debian package none))", lines)
        self.assertIn("  failed: plain.fail", lines)

    def test_under_ci_a_missing_tool_fails_and_a_skip_by_design_does_not(self):
        rc, lines = self.run_runner(ci=True)
        self.assertEqual(lines[-1], "4 passed, 3 failed, 3 skipped", self.shown(lines))
        self.assertEqual(rc, 1)
        self.assertIn("  failed: style.clang_format", lines)
        failed_case = "  failed: integration.missing_tool: T.test_with_tool (AssertionError: missing tool"
        self.assertTrue(any(line.startswith(failed_case) for line in lines), self.shown(lines))
        self.assertIn("  skipped: unit.Spares.Recycles", lines)


class SummaryParsing(unittest.TestCase):
    LOG = """Test project /b
      Start  1: a
 1/9 Test  #1: a ................................   Passed    0.01 sec
 2/9 Test  #2: b ................................***Failed    0.02 sec
output of b
 3/9 Test  #3: c ................................***Skipped   0.00 sec
 4/9 Test  #4: d ................................***Timeout  300.01 sec
 5/9 Test  #5: e ................................***Exception: SegFault  0.10 sec
 6/9 Test  #6: a_very_long_test_name_beyond_the_dots   Passed    1.00 sec
 7/9 Test  #7: All/M.Map/16-byte object <D2-92 A8-C6 B1-55 00-00> ...   Passed    0.07 sec
 8/9 Test  #8: f ................................Subprocess aborted***Exception:   0.53 sec
 9/9 Test  #9: All/M.Map/16-byte object <AE-46> ...***Failed    0.07 sec

67% tests passed, 5 tests failed out of 9
"""

    def test_every_status_ctest_prints(self):
        self.assertEqual(ctest_summary.ctest_results(self.LOG),
                         [("a", "passed"), ("b", "failed"), ("c", "skipped"), ("d", "failed"),
                          ("e", "failed"), ("a_very_long_test_name_beyond_the_dots", "passed"),
                          ("All/M.Map/16-byte object <D2-92 A8-C6 B1-55 00-00>", "passed"), ("f", "failed"),
                          ("All/M.Map/16-byte object <AE-46>", "failed")])

    def test_cases_replace_their_file_and_a_failure_outside_them_counts(self):
        tmp = tempfile.mkdtemp(prefix="peregrine-summary-")
        self.addCleanup(shutil.rmtree, tmp, True)
        harness.write_tree(tmp, {"a.tsv": "passed\tx.T.one\t\npassed\tx.T.two\t\nskipped\tx.T.three\tno root\n",
                                 "d.tsv": "passed\tx.T.one\t\n"})
        counts, notes = ctest_summary.summarize(self.LOG, tmp)
        # a: 2 passed + 1 skipped; d timed out after its case passed: 1 more failure.
        self.assertEqual(counts, {"passed": 5, "failed": 5, "skipped": 2})
        self.assertIn(("skipped", "a: x.T.three", "no root"), notes)
        self.assertIn(("failed", "d", "the test failed outside its cases"), notes)


if __name__ == "__main__":
    harness.main()
