"""What every part of the benchmark shares: the CPU split, the errors, and how it prints."""

import os
import re
import sys

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(BENCH_DIR)
# The helper processes (the reaper, the idle10k client) are this same entry point with an internal
# flag, so they need no import path of their own.
RUN_PY = os.path.join(BENCH_DIR, "run.py")

# The server under test has CPU 0 to itself; the load generator and every back end share CPU 1,
# so CPU 0's time is the server's alone.
SERVER_CPU = "0"
CLIENT_CPU = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def labelled_binaries(specs, error):
    """The --peregrine-binary LABEL=PATH options as [(label, absolute path)]. error(message) is
    called (argparse's: it exits) for a malformed spec or a label given twice, which would merge
    two builds' runs under one name."""
    builds, labels = [], set()
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path or not re.fullmatch(r"[A-Za-z0-9_.]+", label):
            error(f"--peregrine-binary {spec!r}: want LABEL=PATH, LABEL of letters, digits, _ and .")
        if label in labels:
            error(f"--peregrine-binary: label {label!r} given twice")
        labels.add(label)
        builds.append((label, os.path.abspath(path)))
    return builds


class BenchError(Exception):
    pass


class ServerError(BenchError):
    pass


class BackendError(BenchError):
    pass


def log(msg=""):
    print(msg, flush=True)


def warn(msg):
    print("WARNING: " + msg, file=sys.stderr, flush=True)
