#!/usr/bin/env bash
# Every test tier, twice: a release build and an ASan+UBSan build. Unit tests (GoogleTest),
# fuzz-corpus replay and integration tests (the real binary driven by curl, python, ab) all run
# under CTest. Ends with the line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
passed=0
failed=0
status=0

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
  local log
  log=$(mktemp)
  # Integration tests start servers on ephemeral ports; two at a time keeps this 2-core box honest.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "build/$preset" --output-on-failure -j 2 --timeout 300 2>&1 | tee "$log"
  local ctest_status=${PIPESTATUS[0]}
  local p f
  # One result line per test: "N/M Test #K: name ....   Passed    0.01 sec" (or ***Failed, ...).
  local results
  results=$(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$log")
  p=$(grep -cE ' Passed +[0-9.]+ sec$' <<<"$results")
  f=$(grep -vE ' Passed +[0-9.]+ sec$|Skipped +[0-9.]+ sec$' <<<"$results" | grep -c .)
  # Whatever the counting says, a non-zero ctest status is a failure (e.g. a test that never ran).
  if [ "$ctest_status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -eq 0 ] || status=1
  rm -f "$log"
}

run_preset release
run_preset asan

echo "${passed} passed, ${failed} failed"
exit $status
