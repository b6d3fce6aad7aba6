#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what .clang-format makes of it (`make format` fixes).
# One clang-format process for every file: a process per file took a minute of CI.
set -uo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  sources() { git ls-files -z '*.cc' '*.h'; }
else  # a source tarball, or a machine without git: the same files, less what builds made
  sources() { find . \( -path ./.git -o -path './build*' \) -prune -o \( -name '*.cc' -o -name '*.h' \) -print0; }
fi
# An empty list would make clang-format read standard input and pass: no files is a failure.
count=$(sources | tr -cd '\0' | wc -c)
if [ "$count" -eq 0 ]; then
  echo "no C++ files found to check"
  exit 1
fi
out=$(sources | xargs -0 clang-format --dry-run --Werror 2>&1)
status=$?
if [ $status -eq 0 ]; then
  echo "all $count C++ files formatted"
  exit 0
fi
# clang-format names the file on each complaint ("path:line:col: error: code should be ...").
grep -o '^[^:]*:[0-9]*:[0-9]*: error' <<<"$out" | cut -d: -f1 | sort -u | sed 's/^/not formatted: /'
[ -n "$out" ] || echo "clang-format failed (status $status)"
exit 1
