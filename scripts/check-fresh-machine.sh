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
# shellcheck source=scripts/lib/chroot.sh
. scripts/lib/chroot.sh

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
server_pid=""
cleanup() {
  local status=$?
  set +e  # every step of the cleanup runs, whatever fails
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  chroot_umount
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

phase "debootstrap bookworm minbase from $(debian_mirror) into $dir"
t0=$SECONDS
chroot_create "$dir" "$log_dir/debootstrap.log"
t_debootstrap=$((SECONDS - t0))
chroot_mount "$dir"

commit=$(git rev-parse --short HEAD)  # what is checked, whatever HEAD is by the end
phase "clone $repo ($commit) into /root/peregrine"
git clone -q --no-hardlinks "$repo" "$dir/root/peregrine"
for tool in make gcc g++ cc curl python3; do
  if chroot_run "$dir" "command -v $tool" >/dev/null; then
    echo "not a fresh machine: $tool is installed" >&2
    exit 1
  fi
done

# The welcome page's port: 8080 unless something here already holds it.
port=$(free_port 8080)
[ "$port" -eq 8080 ] || chroot_env=("LISTEN=127.0.0.1:$port")

phase "run command: ${chroot_env[*]} $run_cmd"
t0=$SECONDS
chroot_start "$dir" "cd /root/peregrine && exec $run_cmd" >"$log_dir/run.log" 2>&1
server_pid=$!
chroot_env=()
served=0
while kill -0 "$server_pid" 2>/dev/null; do
  if response=$(http_get "$dir" "$port" / 2>/dev/null); then
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
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "something still serves on port $port after the run command was stopped" >&2
  exit 1
fi
phase "run command served its page after ${t_run} s; stopped it"

t_test=0
result="skipped"
if [ "$skip_test" -eq 0 ]; then
  phase "test command: $test_cmd"
  t0=$SECONDS
  set +e
  chroot_run "$dir" "cd /root/peregrine && $test_cmd" 2>&1 | tee "$log_dir/test.log" | grep -E '^(=== |[0-9]+ passed, [0-9]+ failed)|\*\*\*Failed|Test +#[0-9]+: .*(Failed|Timeout|Not Run)'
  test_status=${PIPESTATUS[0]}
  set -e
  t_test=$((SECONDS - t0))
  result=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log_dir/test.log" | tail -n1)
  result=${result:-"no result line (exit $test_status)"}
fi

echo
echo "fresh-machine check on Debian 12 minbase ($commit):"
echo "  debootstrap      ${t_debootstrap} s"
echo "  run command      ${t_run} s until it served ($status_line)"
echo "  test command     ${t_test} s: $result"
echo "  total            $((SECONDS - phase_start)) s"
[ "$skip_test" -eq 1 ] || { [ "${test_status:-1}" -eq 0 ] && [[ "$result" == *" 0 failed"* ]]; }
