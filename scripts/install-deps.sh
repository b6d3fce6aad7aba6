#!/usr/bin/env bash
# Installs the Debian packages Peregrine needs to build, test, benchmark and package, when any is
# missing.
# Runs apt-get update once, and only when something has to be installed.
set -euo pipefail

build_packages=(g++ cmake ninja-build pkg-config libtomlplusplus-dev libpcre2-dev liburing-dev libssl-dev
                libgtest-dev libsystemd-dev libnghttp2-dev zlib1g-dev libbrotli-dev libzstd-dev
                libcrypt-dev)
# The ACME client's messages (src/acme/): JSON documents from and to the CA, header-only.
build_packages+=(nlohmann-json3-dev)
test_packages=(clang clang-format libclang-rt-14-dev python3 curl apache2-utils wrk nginx-light php8.2-fpm python3-websockets)
bench_packages=(h2o lighttpd lighttpd-modules-lua lighttpd-mod-openssl libnginx-mod-http-echo)
# TLS and HTTP/2 peers: openssl s_client, nghttp and h2load, frame-level tests, testssl.sh.
test_packages+=(openssl nghttp2-client python3-h2 testssl.sh)
# The bench's system-call counts (bench/run.py --syscalls; tests/integration/test_bench_harness.py).
test_packages+=(strace)
# systemd-analyze verify of the package's unit (tests/integration/test_package.py).
test_packages+=(systemd)
# AJP13's peer (tests/integration/test_ajp.py runs Tomcat 10 with its own CATALINA_BASE).
test_packages+=(tomcat10)
# A seccomp filter that refuses io_uring, as containers do (tests/integration/test_event_backend.py).
test_packages+=(python3-seccomp)
# The metrics' strict Prometheus text parser, and the admin UI in a real headless browser.
test_packages+=(python3-prometheus-client chromium chromium-driver python3-selenium fonts-dejavu-core)
# Apache with mod_jk and mod_proxy_ajp, AJP's comparison in bench/.
bench_packages+=(apache2 libapache2-mod-jk)
# An ACME test CA with real HTTP-01 and TLS-ALPN-01 validation (tests/integration/test_acme.py).
test_packages+=(pebble)
# Building and checking the Debian package (scripts/build-deb.sh, scripts/check-package.sh) and
# the fresh-machine check (scripts/check-fresh-machine.sh).
package_packages=(debhelper pandoc lintian debootstrap systemd fakeroot python3)

wanted=("${build_packages[@]}")
case "${1:-build}" in
  build) ;;
  test) wanted+=("${test_packages[@]}") ;;
  bench) wanted+=("${test_packages[@]}" "${bench_packages[@]}") ;;
  package) wanted+=("${package_packages[@]}") ;;
  *) echo "usage: $0 [build|test|bench|package]" >&2; exit 2 ;;
esac

missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# Package scripts must not start services (nginx, lighttpd, h2o): the tests start their own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
