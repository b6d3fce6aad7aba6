#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what .clang-format makes of it (`make format` fixes).
set -uo pipefail
cd "$(dirname "$0")/.."
bad=0
for f in $(git ls-files '*.cc' '*.h'); do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "all C++ files formatted"
exit $bad
