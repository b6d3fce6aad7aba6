#!/usr/bin/env bash
# Proves the README's two commands on a fresh, minimal Debian 12: debootstraps bookworm
# (--variant=minbase: no make, compiler, curl or python3) from the mirror this machine's apt uses,
# clones this repository into it, then runs the commands exactly as the README writes them: the
# run command in the background until it serves its page (checked with bash's /dev/tcp, since a
# fresh machine has no curl), and then the test command, which must end with "N passed, 0 failed".
#
# Slow (the chroot installs the toolchain and builds everything twice): run it by hand after any
# change to the install steps, not in CI. Needs root (debootstrap, chroot, mounts).
#
#   scripts/check-fresh-machine.sh [--dir DIR] [--keep] [--skip-test]
#
#   --dir DIR     build the chroot in DIR (default: a new directory under /var/tmp)
#   --keep        leave the chroot in place afterwards (to look around: chroot DIR bash)
#   --skip-test   stop after the run command served its page
#
# The clone is of this repository's committed HEAD: commit before checking.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

dir=""
keep=0
skip_test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --skip-test) skip_test=1; shift ;;
    *) echo "usage: $0 [--dir DIR] [--keep] [--skip-test]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || ./scripts/install-deps.sh package

# The Debian mirror apt uses here: it may be the only package repository this machine reaches.
mirror=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
           /etc/apt/sources.list.d/*.sources |
         grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}

# The README's commands, as written: the first fenced block after "## Two commands".
mapfile -t commands < <(awk '/^## Two commands/ {s = 1} s && /^```/ {if (b) exit; b = 1; next}
                             b {sub(/ *#.*/, ""); if (length) print}' README.md)
if [ ${#commands[@]} -ne 2 ]; then
  echo "expected two commands in README.md's \"Two commands\" block, found: ${commands[*]}" >&2
  exit 2
fi
run_cmd=${commands[0]}
test_cmd=${commands[1]}

[ -n "$dir" ] || dir=$(mktemp -d /var/tmp/peregrine-fresh.XXXXXX)
mkdir -p "$dir"
log_dir="$dir.logs"
mkdir -p "$log_dir"
mounted=()
server_pid=""
cleanup() {
  local status=$?
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  # Processes the tests left behind (none should) would keep the mounts busy.
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true
  done
  if [ "$keep" -eq 0 ] && ! mount | grep -q " on $dir/"; then
    rm -rf --one-file-system "$dir"
  fi
  echo "logs: $log_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

phase_start=$SECONDS
phase() { echo "=== $(date -u +%H:%M:%S) $* (+$((SECONDS - phase_start)) s)"; }

phase "debootstrap bookworm minbase from $mirror into $dir"
t0=$SECONDS
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$log_dir/debootstrap.log" 2>&1 ||
  { tail -n 20 "$log_dir/debootstrap.log"; exit 1; }
t_debootstrap=$((SECONDS - t0))
# The same suites as here (updates and security), from the same host.
{
  echo "deb $mirror bookworm main"
  echo "deb $mirror bookworm-updates main"
  echo "deb ${mirror%/debian*}/debian-security bookworm-security main"
} >"$dir/etc/apt/sources.list"
cp /etc/resolv.conf "$dir/etc/resolv.conf"
for f in /etc/apt/apt.conf.d/*proxy*; do [ -e "$f" ] && cp "$f" "$dir/etc/apt/apt.conf.d/"; done

for m in proc sys dev dev/pts dev/shm; do
  case "$m" in
    proc) mount -t proc proc "$dir/proc" ;;
    sys) mount -t sysfs sysfs "$dir/sys" ;;
    dev) mount --bind /dev "$dir/dev" ;;
    dev/pts) mount --bind /dev/pts "$dir/dev/pts" ;;
    dev/shm) mount -t tmpfs -o mode=1777 tmpfs "$dir/dev/shm" ;;
  esac
  mounted+=("$dir/$m")
done

phase "clone $repo ($(git rev-parse --short HEAD)) into /root/peregrine"
git clone -q --no-hardlinks "$repo" "$dir/root/peregrine"
for tool in make gcc g++ cc curl python3; do
  if chroot "$dir" /bin/bash -c "command -v $tool" >/dev/null; then
    echo "not a fresh machine: $tool is installed" >&2
    exit 1
  fi
done

# A login's environment, not this script's; $extra_env adds to it.
extra_env=()
in_chroot() {
  chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${extra_env[@]}" \
    /bin/bash -c "cd /root/peregrine && $1"
}

# The welcome page's port: 8080 unless something here already holds it.
port=8080
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
[ "$port" -eq 8080 ] || extra_env=("LISTEN=127.0.0.1:$port")

phase "run command: ${extra_env[*]} $run_cmd"
t0=$SECONDS
in_chroot "exec $run_cmd" >"$log_dir/run.log" 2>&1 &
server_pid=$!
extra_env=()
served=0
while kill -0 "$server_pid" 2>/dev/null; do
  if response=$(in_chroot "exec 3<>/dev/tcp/127.0.0.1/$port &&
        printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3 && cat <&3" 2>/dev/null); then
    served=1
    break
  fi
  sleep 5
done
t_run=$((SECONDS - t0))
if [ "$served" -ne 1 ]; then
  echo "the run command exited before serving:" >&2
  tail -n 30 "$log_dir/run.log" >&2
  exit 1
fi
status_line=$(head -n1 <<<"$response" | tr -d '\r')
echo "GET http://127.0.0.1:$port/ -> $status_line"
grep -q "welcome page" <<<"$response" || { echo "not the welcome page:" >&2; head -c 600 <<<"$response" >&2; exit 1; }
[[ "$status_line" == "HTTP/1.1 200"* ]] || exit 1
kill -TERM "$server_pid"
wait "$server_pid" || true
server_pid=""
phase "run command served its page after ${t_run} s; stopped it"

t_test=0
result="skipped"
if [ "$skip_test" -eq 0 ]; then
  phase "test command: $test_cmd"
  t0=$SECONDS
  set +e
  in_chroot "$test_cmd" 2>&1 | tee "$log_dir/test.log" | grep -E '^(=== |[0-9]+ passed, [0-9]+ failed)|\*\*\*Failed|Test +#[0-9]+: .*(Failed|Timeout|Not Run)'
  test_status=${PIPESTATUS[0]}
  set -e
  t_test=$((SECONDS - t0))
  result=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log_dir/test.log" | tail -n1)
  result=${result:-"no result line (exit $test_status)"}
fi

echo
echo "fresh-machine check on Debian 12 minbase ($(git rev-parse --short HEAD)):"
echo "  debootstrap      ${t_debootstrap} s"
echo "  run command      ${t_run} s until it served ($status_line)"
echo "  test command     ${t_test} s: $result"
echo "  total            $((SECONDS - phase_start)) s"
[ "$skip_test" -eq 1 ] || { [ "${test_status:-1}" -eq 0 ] && [[ "$result" == *" 0 failed" ]]; }
