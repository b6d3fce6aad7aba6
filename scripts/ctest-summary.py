#!/usr/bin/env python3
"""Counts one CTest run for scripts/run-tests.sh: passed, failed and skipped.

    ctest-summary.py CTEST_LOG [RESULTS_DIR]

CTEST_LOG is CTest's console output; each test has a result line "N/M Test #K: NAME ...  STATUS
T sec". A GoogleTest shard or an integration test file is one CTest test, but each writes its
cases' outcomes (tests/unit/main.cc, tests/integration/harness.py) to RESULTS_DIR/NAME.tsv: where
that file exists its cases are counted instead, so a skipped case inside a passing file is seen.
A CTest test without one (a fuzz corpus, the style check) counts once.

Prints the failed and the skipped tests (with the reason where the harness gave one), then a last
line "PASSED FAILED SKIPPED" for the runner to add up.
"""

import os
import re
import sys

# The name may hold spaces (a GoogleTest parameter printed as "16-byte object <...>"); the dots
# run up to the status: "Passed", or one with "***" ("***Failed", "***Skipped", "***Timeout",
# "***Exception: SegFault", "Subprocess aborted***Exception:" for an ASan abort).
RESULT_LINE = re.compile(r"^\s*\d+/\d+\s+Test\s+#\d+:\s(.+?)\s\.*\s*(Passed|\*\*\*.*?|Subprocess aborted\*\*\*.*?)"
                         r"\s+[\d.]+\s+sec\s*$")


def ctest_results(log_text):
    """[(name, passed|failed|skipped)] in the order CTest finished them. Everything but Passed and
    Skipped (Failed, Timeout, Exception: ..., Not Run) is a failure."""
    out = []
    for line in log_text.splitlines():
        m = RESULT_LINE.match(line)
        if not m:
            continue
        status = m.group(2)
        out.append((m.group(1).strip(), "passed" if status == "Passed" else
                    "skipped" if status == "***Skipped" else "failed"))
    return out


def read_cases(results_dir, name):
    """[(status, case id, reason)] the harness wrote for CTest test `name`, or None."""
    if not results_dir:
        return None
    try:
        with open(os.path.join(results_dir, name + ".tsv")) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    return [tuple((line.split("\t") + ["", ""])[:3]) for line in lines if line]


def summarize(log_text, results_dir=None):
    """(counts {passed, failed, skipped}, [(status, name, reason)] of what did not pass)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    notes = []
    for name, status in ctest_results(log_text):
        cases = read_cases(results_dir, name)
        if cases is None:
            counts[status] += 1
            if status != "passed":
                notes.append((status, name, ""))
            continue
        for case_status, case, reason in cases:
            counts[case_status] += 1
            if case_status != "passed":
                notes.append((case_status, f"{name}: {case}", reason))
        # The file failed after its cases were counted (a crash at exit, a leak report, a
        # timeout racing the write): that is a failure the cases do not show.
        if status == "failed" and not any(c[0] == "failed" for c in cases):
            counts["failed"] += 1
            notes.append(("failed", name, "the test failed outside its cases"))
    return counts, notes


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1], errors="replace") as f:
        log_text = f.read()
    counts, notes = summarize(log_text, argv[2] if len(argv) == 3 else None)
    for status, name, reason in sorted(notes):
        print(f"  {status}: {name}" + (f" ({reason})" if reason else ""))
    print(counts["passed"], counts["failed"], counts["skipped"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
