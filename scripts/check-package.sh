#!/usr/bin/env bash
# Installs the Debian package (scripts/build-deb.sh) into a Debian 12 minbase chroot and checks it
# as a machine would use it:
#   - the files are where they belong, and the postinst made the welcome page;
#   - `systemd-analyze verify` passes on the installed unit (with its man pages installed);
#   - `peregrine -t` passes on the shipped /etc/peregrine/peregrine.toml;
#   - started as the unit starts it (www-data, only CAP_NET_BIND_SERVICE, /run/peregrine), it
#     reports READY=1 to NOTIFY_SOCKET (when the build has sd_notify), serves the page, and
#     after `logrotate -f` writes to the new log (the USR1 of the logrotate file);
#   - a reload (HUP) reports RELOADING=1 and READY=1; a stop (QUIT) STOPPING=1.
# Port 80 when it is free here, else a copy of the configuration on another loopback port.
# Slow when it debootstraps (minutes): --chroot reuses one (it gets the package installed).
#
#   scripts/check-package.sh [--chroot DIR] [--keep] [DEB]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/chroot.sh
. scripts/lib/chroot.sh

dir=""
keep=0
deb=""
while [ $# -gt 0 ]; do
  case "$1" in
    --chroot) dir=$2; keep=1; shift 2 ;;
    --keep) keep=1; shift ;;
    -*) echo "usage: $0 [--chroot DIR] [--keep] [DEB]" >&2; exit 2 ;;
    *) deb=$1; shift ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
[ -n "$deb" ] || deb=$(ls -t build/deb/peregrine_*.deb 2>/dev/null | head -n1)
[ -f "$deb" ] || { echo "no package: run scripts/build-deb.sh first" >&2; exit 2; }
if ! command -v debootstrap >/dev/null || ! command -v python3 >/dev/null; then
  ./scripts/install-deps.sh package
fi

server_pid=""
notify_pid=""
work=$(mktemp -d /var/tmp/peregrine-pkgcheck.XXXXXX)
cleanup() {
  local status=$?
  set +e  # every step of the cleanup runs, whatever fails
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [ -n "$notify_pid" ] && kill "$notify_pid" 2>/dev/null && wait "$notify_pid" 2>/dev/null
  chroot_umount
  # --one-file-system: a mount that would not go away must not take the machine's /dev with it.
  if [ "$keep" -eq 0 ] && [ -n "$dir" ] && ! mount | grep -q " on $dir/"; then
    rm -rf --one-file-system "$dir"
  fi
  if [ "$keep" -eq 1 ] && [ "$dir" = "$work/root" ]; then
    echo "kept: $dir"
  else
    rm -rf --one-file-system "$work"
  fi
  [ "$status" -eq 0 ] && echo "package check passed" || echo "package check FAILED"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "=== $(date -u +%H:%M:%S) $*"; }

if [ -z "$dir" ]; then
  dir="$work/root"
  step "debootstrap bookworm minbase into $dir"
  chroot_create "$dir" "$work/debootstrap.log"
fi
chroot_mount "$dir"

step "install $(basename "$deb") with systemd, man-db and logrotate"
cp "$deb" "$dir/tmp/peregrine.deb"
# No service starts from a package script in the chroot (there is no systemd running anyway).
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
chmod +x "$dir/usr/sbin/policy-rc.d"
chroot_run "$dir" "export DEBIAN_FRONTEND=noninteractive && apt-get update -q &&
  apt-get install -y -q --no-install-recommends --reinstall systemd man-db logrotate /tmp/peregrine.deb" \
  >"$work/apt.log" 2>&1 || { tail -n 30 "$work/apt.log"; fail "apt-get install"; }
rm -f "$dir/usr/sbin/policy-rc.d"

step "files"
for f in /usr/sbin/peregrine /usr/bin/peregrine-bench /etc/peregrine/peregrine.toml \
         /lib/systemd/system/peregrine.service /etc/logrotate.d/peregrine \
         /usr/share/man/man8/peregrine.8.gz /usr/share/man/man5/peregrine.toml.5.gz \
         /usr/share/man/man1/peregrine-bench.1.gz /usr/share/doc/peregrine/examples/wordpress.toml \
         /usr/share/doc/peregrine/examples/tomcat-proxy.toml /var/www/html/index.html; do
  [ -e "$dir$f" ] || fail "$f is missing"
done
chroot_run "$dir" "peregrine --version && peregrine-bench --version" | sed 's/^/  /'

step "systemd-analyze verify"
chroot_run "$dir" "systemd-analyze verify /lib/systemd/system/peregrine.service" >"$work/verify.log" 2>&1 ||
  { cat "$work/verify.log"; fail "systemd-analyze verify"; }
[ ! -s "$work/verify.log" ] || { cat "$work/verify.log"; fail "systemd-analyze verify has warnings"; }
chroot_run "$dir" "systemd-analyze security --offline=yes peregrine.service" 2>&1 | tail -n1 | sed 's/^/  /'

step "peregrine -t on the shipped configuration"
chroot_run "$dir" "peregrine -t -c /etc/peregrine/peregrine.toml" || fail "peregrine -t"

config=/etc/peregrine/peregrine.toml
port=80
if (exec 3<>/dev/tcp/127.0.0.1/80) 2>/dev/null; then
  port=$(free_port 18080)
  config=/etc/peregrine/check-package.toml
  sed "s/^listen = .*/listen = [\"127.0.0.1:$port\"]/" "$dir/etc/peregrine/peregrine.toml" >"$dir$config"
  echo "  port 80 is taken here: serving the shipped file with listen = 127.0.0.1:$port"
fi

# What the unit's RuntimeDirectory= and LogsDirectory= prepare.
chroot_run "$dir" "install -d -o www-data -g www-data /run/peregrine && chown www-data:www-data /var/log/peregrine"
notify_log="$work/notify.log"
if grep -q "READY=1" "$dir/usr/sbin/peregrine"; then
  # systemd's side of Type=notify: a datagram socket whose messages are written one per line.
  rm -f "$dir/run/notify.sock"
  python3 - "$dir/run/notify.sock" "$notify_log" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)  # as systemd's: the server sends as www-data
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", " ") + "\n")
PY
  notify_pid=$!
  for _ in $(seq 50); do [ -S "$dir/run/notify.sock" ] && break; sleep 0.1; done
  chroot_env=(NOTIFY_SOCKET=/run/notify.sock)
else
  echo "  this build has no sd_notify: READY/RELOADING/STOPPING are not checked"
fi
wait_notify() {  # wait_notify FIELD COUNT: the COUNTth message with FIELD arrived
  [ -n "$notify_pid" ] || return 0
  for _ in $(seq 100); do
    [ "$(grep -cs -- "$1" "$notify_log")" -ge "$2" ] 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$notify_log" >&2 2>/dev/null
  fail "no $1 (#$2) on NOTIFY_SOCKET"
}

step "start as the unit does: www-data with CAP_NET_BIND_SERVICE, port $port"
chroot_start "$dir" "exec setpriv --reuid=www-data --regid=www-data --init-groups \
  --inh-caps=-all,+net_bind_service --ambient-caps=-all,+net_bind_service --bounding-set=-all,+net_bind_service \
  --no-new-privs /usr/sbin/peregrine -c $config" >"$work/server.log" 2>&1
server_pid=$!
chroot_env=()
for _ in $(seq 100); do
  response=$(http_get "$dir" "$port" / 2>/dev/null) && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" "$dir/var/log/peregrine/error.log"; fail "the server exited"; }
  sleep 0.1
done
[[ "$(head -n1 <<<"$response")" == "HTTP/1.1 200"* ]] || fail "GET / answered: $(head -n1 <<<"$response")"
grep -q "Peregrine is serving this machine" <<<"$response" || fail "GET / is not the welcome page"
wait_notify "READY=1" 1
[ "$(cat "$dir/run/peregrine/peregrine.pid")" = "$server_pid" ] || fail "the pid file does not hold $server_pid"
read -r _ uid _ < <(grep '^Uid:' "/proc/$server_pid/status")
read -r _ caps < <(grep '^CapEff:' "/proc/$server_pid/status")
[ "$uid" = "$(chroot_run "$dir" "id -u www-data")" ] || fail "runs as uid $uid, not www-data"
[ "$caps" = "0000000000000400" ] || fail "effective capabilities $caps, not CAP_NET_BIND_SERVICE alone"
echo "  GET / -> 200, the welcome page; pid $server_pid (the pid file's), uid $uid (www-data), CapEff $caps"
# The rotation below skips an empty log (notifempty): the access log is written asynchronously.
for _ in $(seq 50); do [ -s "$dir/var/log/peregrine/access.log" ] && break; sleep 0.1; done

step "logrotate -f /etc/logrotate.d/peregrine (USR1)"
chroot_run "$dir" "logrotate -f /etc/logrotate.d/peregrine" || fail "logrotate"
[ -e "$dir/var/log/peregrine/access.log.1" ] || fail "access.log was not rotated"
sleep 0.5
marker="/after-rotation-$$-$RANDOM"  # a reused chroot keeps older runs' logs
http_get "$dir" "$port" "$marker" >/dev/null
for _ in $(seq 50); do grep -q "$marker" "$dir/var/log/peregrine/access.log" 2>/dev/null && break; sleep 0.1; done
grep -q "$marker" "$dir/var/log/peregrine/access.log" || fail "no request logged after the rotation"
grep -q "$marker" "$dir/var/log/peregrine/access.log.1" && fail "the old log is still written"

step "reload (HUP) and stop (QUIT)"
kill -HUP "$server_pid"
wait_notify "RELOADING=1" 1
wait_notify "READY=1" 2
http_get "$dir" "$port" / >/dev/null || fail "not serving after the reload"
kill -QUIT "$server_pid"
wait "$server_pid" || fail "exit status $? after SIGQUIT"
server_pid=""
wait_notify "STOPPING=1" 1
[ -n "$notify_pid" ] && sed 's/^/  notify: /' "$notify_log"
true
