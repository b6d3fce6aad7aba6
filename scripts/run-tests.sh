#!/usr/bin/env bash
# Every test tier, twice: a release build and an ASan+UBSan build. Unit tests (GoogleTest),
# fuzz-corpus replay and integration tests (the real binary driven by curl, python, ab) all run
# under CTest; in the release build the integration tier runs a third time, on the io_uring event
# backend (PEREGRINE_URING_TESTS=off skips that, or names a CTest regex to run fewer). Ends with
# the line "N passed, N failed, N skipped".
#
# What is counted: a GoogleTest case, a fuzz corpus and the style check are one CTest test each;
# an integration file is one CTest test, but its cases are counted one by one (the harness writes
# each case's outcome; scripts/ctest-summary.py reads them), so a case skipped inside a passing
# file still shows. A skip by design (GTEST_SKIP in the ASan build, a test that needs root) stays
# a skip. A skip because a tool or package is missing (harness.require_tool) is a failure under
# CI=true: CI installs what the tests need, and there a missing tool would turn a tier off unseen.
#
#   scripts/run-tests.sh                  build and test both presets
#   scripts/run-tests.sh --ctest-dir DIR  test an already built CTest directory only (the runner's
#                                         own test, tests/integration/test_run_tests.py, uses it)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

jobs=$(nproc)
passed=0
failed=0
skipped=0
status=0

# Runs CTest in $1 (with any further CTest arguments, e.g. -R REGEX) and adds what it counted.
run_ctest() {
  local dir=$1
  shift
  local log results
  log=$(mktemp)
  results=$(mktemp -d)
  # Integration tests start servers on ephemeral ports; two at a time keeps this 2-core box honest.
  PEREGRINE_TEST_RESULTS=$results \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure --no-tests=error -j 2 --timeout 300 "$@" 2>&1 | tee "$log"
  local ctest_status=${PIPESTATUS[0]}
  local summary p=0 f=1 s=0
  if summary=$(python3 "$here/ctest-summary.py" "$log" "$results"); then
    read -r p f s <<<"$(tail -n 1 <<<"$summary")"
    sed '$d' <<<"$summary"
  else
    echo "could not count the results in $log"
  fi
  # Whatever the counting says, a non-zero ctest status is a failure (e.g. a test that never ran).
  if [ "$ctest_status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  echo "=== $dir: $p passed, $f failed, $s skipped"
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
  [ "$f" -eq 0 ] || status=1
  rm -rf "$log" "$results"
}

run_preset() {
  local preset=$1
  echo "=== building ($preset)"
  if ! cmake --preset "$preset" >/dev/null || ! cmake --build --preset "$preset" -j "$jobs"; then
    echo "build failed ($preset)"
    failed=$((failed + 1))
    status=1
    return
  fi
  echo "=== testing ($preset)"
  run_ctest "build/$preset"
  # The integration tier once more on the io_uring event backend (docs/io_uring.md), in the
  # release build only: the harness starts every server with --event-backend io_uring.
  # PEREGRINE_URING_TESTS narrows it (a CTest regex) or turns it off ("off").
  local uring_tests=${PEREGRINE_URING_TESTS:-^integration\.}
  if [ "$preset" = release ] && [ "$uring_tests" != off ]; then
    echo "=== testing ($preset, integration tier on io_uring)"
    export PEREGRINE_EVENT_BACKEND=io_uring
    run_ctest "build/$preset" -R "$uring_tests"
    unset PEREGRINE_EVENT_BACKEND
  fi
}

if [ "${1:-}" = "--ctest-dir" ] && [ $# -eq 2 ]; then
  run_ctest "$2"
elif [ $# -eq 0 ]; then
  cd "$here/.."
  run_preset release
  run_preset asan
else
  echo "usage: $0 [--ctest-dir DIR]" >&2
  exit 2
fi

echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $status
