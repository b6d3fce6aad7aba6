#!/usr/bin/env bash
# The README's first command: installs the Debian packages that are missing, builds the server
# alone (not the unit tests or fuzz replays: it only runs the server) and serves ./www, or the
# built-in welcome page when there is no ./www, on $LISTEN (default 127.0.0.1:8080).
# Needs only bash and apt: run it as root, or as a user who may sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

listen=${LISTEN:-127.0.0.1:8080}
./scripts/install-deps.sh build
cmake --preset release >/dev/null
cmake --build --preset release --target peregrine
echo "serving on http://${listen}/ (Ctrl-C stops)"
exec ./build/release/peregrine --listen "$listen"   # serves ./www when it exists
