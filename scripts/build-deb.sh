#!/usr/bin/env bash
# Builds the Debian package: build/deb/peregrine_VERSION_ARCH.deb, then runs lintian on it.
# Installs what is missing (scripts/install-deps.sh package). The source tree is copied first
# (the files git knows, as they are in the worktree), so that dpkg-buildpackage's output and
# debian/build stay out of the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh package
version=$(dpkg-parsechangelog -S Version)
out=build/deb
src="$out/peregrine-$version"
# A fresh copy, but the previous build directory is kept: tar keeps the files' times, so ninja
# rebuilds only what changed.
[ -d "$src/debian/build" ] && mv "$src/debian/build" "$out/build-cache"
rm -rf "$src"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$src"
[ -d "$out/build-cache" ] && mv "$out/build-cache" "$src/debian/build"
# -nc: no "debian/rules clean" first, which would delete the kept build directory.
(cd "$src" && dpkg-buildpackage -b -nc -us -uc -j"$(nproc)")
deb=$(ls "$out"/peregrine_"${version}"_*.deb)
changes=$(ls "$out"/peregrine_"${version}"_*.changes)
echo "=== lintian"
# Errors and warnings fail the build; info tags are shown too. debian/peregrine.lintian-overrides
# says why each overridden tag does not apply.
lintian --fail-on error,warning --display-info "$changes"
echo "built $deb"
