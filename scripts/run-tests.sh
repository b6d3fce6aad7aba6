#!/usr/bin/env bash
# Every test tier, twice: a release build and an ASan+UBSan build. Unit tests (GoogleTest),
# fuzz-corpus replay and integration tests (the real binary driven by curl, python, ab) all run
# under CTest. The integration tier runs on each event backend once: epoll (the default) in the
# release build, io_uring in the ASan build, where the newer backend's completions that outlive a
# connection are most likely to go wrong. Ends with the line "N passed, N failed, N skipped".
#
# What is counted: a fuzz corpus and the style check are one CTest test each; a GoogleTest shard
# and an integration file are one CTest test each, but their cases are counted one by one (each
# writes its cases' outcomes: tests/unit/main.cc, tests/integration/harness.py;
# scripts/ctest-summary.py reads them), so a case skipped inside a passing file still shows. A
# skip by design (GTEST_SKIP in the ASan build, a test that needs root) stays a skip. A skip
# because a tool or package is missing (harness.require_tool) is a failure under CI=true: CI
# installs what the tests need, and there a missing tool would turn a tier off unseen.
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

# Runs CTest in $1 and adds what it counted.
run_ctest() {
  local dir=$1
  local log results
  log=$(mktemp)
  results=$(mktemp -d)
  # Three at a time on this 2-core box: the integration tests mostly wait (on peers, timeouts,
  # sleeps); at two at a time the ASan tier kept the cores ~35 % busy.
  PEREGRINE_TEST_RESULTS=$results \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure --no-tests=error -j 3 --timeout 300 2>&1 | tee "$log"
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
  local preset=$1 backend=$2
  echo "=== building ($preset)"
  if ! cmake --preset "$preset" >/dev/null || ! cmake --build --preset "$preset" -j "$jobs"; then
    echo "build failed ($preset)"
    failed=$((failed + 1))
    status=1
    return
  fi
  echo "=== testing ($preset, integration tier on ${backend:-the default event backend, epoll})"
  PEREGRINE_EVENT_BACKEND=$backend run_ctest "build/$preset"
}

if [ "${1:-}" = "--ctest-dir" ] && [ $# -eq 2 ]; then
  run_ctest "$2"
elif [ $# -eq 0 ]; then
  cd "$here/.."
  run_preset release ""
  run_preset asan io_uring
else
  echo "usage: $0 [--ctest-dir DIR]" >&2
  exit 2
fi

echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $status
