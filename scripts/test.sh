#!/usr/bin/env bash
# The README's second command: installs the Debian packages the tests need when any is missing,
# then builds (release and ASan+UBSan) and runs every test tier; the tests start and stop their
# own servers, php-fpm and nginx. Ends with the line "N passed, N failed".
# Needs only bash and apt: run it as root, or as a user who may sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh test
exec ./scripts/run-tests.sh
