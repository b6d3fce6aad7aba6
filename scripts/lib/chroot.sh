# shellcheck shell=bash
# Shared by scripts/check-fresh-machine.sh and scripts/check-package.sh (sourced, not run): a
# Debian 12 minbase chroot from the mirror this machine's apt uses, its mounts, and their
# removal on exit, whatever happens.

# The Debian mirror apt uses here: it may be the only package repository this machine reaches.
debian_mirror() {
  local mirror
  mirror=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
             /etc/apt/sources.list.d/*.sources |
           grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
  echo "${mirror:-http://deb.debian.org/debian}"
}

# chroot_create DIR LOG: debootstrap bookworm minbase into DIR with the suites this machine uses
# (updates and security, from the same host), and this machine's DNS and apt proxy settings.
chroot_create() {
  local dir=$1 log=$2 mirror f
  mirror=$(debian_mirror)
  debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$log" 2>&1 || { tail -n 20 "$log"; return 1; }
  {
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    echo "deb ${mirror%/debian*}/debian-security bookworm-security main"
  } >"$dir/etc/apt/sources.list"
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  # Every installed Debian has these (the installer, cloud images and containers write them);
  # debootstrap leaves them to the installer, and without them "localhost" does not resolve.
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
  for f in /etc/apt/apt.conf.d/*proxy*; do [ -e "$f" ] && cp "$f" "$dir/etc/apt/apt.conf.d/"; done
  return 0
}

# chroot_mount DIR: what a booted machine has and the tests use (/proc for process status, /dev
# and ptys, shared memory). chroot_umount undoes it; call it from an EXIT trap.
chroot_mounted=()
chroot_mount() {
  local dir=$1 m
  for m in proc sys dev dev/pts dev/shm; do
    case "$m" in
      proc) mount -t proc proc "$dir/proc" ;;
      sys) mount -t sysfs sysfs "$dir/sys" ;;
      dev) mount --bind /dev "$dir/dev" ;;
      dev/pts) mount --bind /dev/pts "$dir/dev/pts" ;;
      dev/shm) mount -t tmpfs -o mode=1777 tmpfs "$dir/dev/shm" ;;
    esac
    chroot_mounted+=("$dir/$m")
  done
}
chroot_umount() {
  local i
  for ((i = ${#chroot_mounted[@]} - 1; i >= 0; i--)); do
    umount "${chroot_mounted[i]}" 2>/dev/null || umount -l "${chroot_mounted[i]}" || true
  done
  chroot_mounted=()
}

# chroot_run DIR COMMAND: COMMAND in bash inside DIR with a login's environment, not the
# caller's; the array chroot_env adds variables (NAME=VALUE).
# chroot_start DIR COMMAND: the same in the background, and $! is the process COMMAND execs
# into (chroot, env and bash all exec), so that signals sent to $! reach it.
chroot_env=()
chroot_exec() {
  exec chroot "$1" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${chroot_env[@]}" \
    /bin/bash -c "$2"
}
chroot_run() { (chroot_exec "$@"); }
chroot_start() { chroot_exec "$@" & }

# http_get DIR PORT PATH: the response to GET PATH on 127.0.0.1:PORT, made from inside the chroot
# with bash's /dev/tcp (a minbase machine has no curl). Fails when nothing listens.
http_get() {
  chroot_run "$1" "exec 3<>/dev/tcp/127.0.0.1/$2 &&
    printf 'GET $3 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3 && cat <&3"
}

# free_port FROM: the first port from FROM up on which nothing listens on 127.0.0.1.
free_port() {
  local port=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port"
}
