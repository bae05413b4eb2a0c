#!/usr/bin/env bash
# Boots a real systemd as PID 1 of its own namespaces, for Vigil's end-to-end tests.
#
#   boot-systemd.sh [--root ROOT] [--bind DIR]... WORKDIR [OVERLAY_LOWER_EXTRA]
#
# Prints the host pid of that systemd on stdout once it is running and exits; systemd keeps
# running in the background. Talk to it with `nsenter -t PID -a systemctl …`, copy files in
# through /proc/PID/root/, stop it with `kill -s SIGRTMIN+4 PID` (it powers off and the
# namespaces disappear). Everything it writes lands in a tmpfs upper layer over the host's root:
# the host is never modified. Needs root.
#
# OVERLAY_LOWER_EXTRA, when given, is a directory whose files are laid over the host root inside
# the sandbox, e.g. an unpacked newer systemd.
#
# --root ROOT boots a whole other root instead of the host's (the overlay's lower dir), e.g. a
# Debian 13 root made by fetch-debian-13.sh; --bind DIR makes the host's DIR visible read-only at
# the same path inside, e.g. the Swift runtime a debug build of vigild links.
set -euo pipefail
lower=/
binds=()
while [ $# -gt 0 ]; do
  case $1 in
    --root) lower=$(realpath "$2"); shift 2 ;;
    --bind) binds+=("$(realpath "$2")"); shift 2 ;;
    *) break ;;
  esac
done
work=$1
extra=${2:-}
mkdir -p "$work"
case $(realpath "$work") in /tmp/*|/var/tmp/*|/run/*) ;; *) echo "WORKDIR must be under /tmp" >&2; exit 2 ;; esac

stage2=$(mktemp "$work/stage2.XXXXXX")
cat > "$stage2" <<'STAGE2'
set -euo pipefail
work=$1; extra=$2; lower=$3; shift 3
# /proc is still the host's here: the parent of `cut` is this shell, as the host numbers it,
# and systemd keeps that pid when it replaces the shell.
cut -d' ' -f4 /proc/self/stat > "$work/pid"
root=$work/root
mkdir -p "$root"
mount -t tmpfs -o size=512m,mode=755 vigil-e2e "$root"
mkdir -p "$root/upper" "$root/work" "$root/merged"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$root/upper,workdir=$root/work" "$root/merged"
m=$root/merged
# Overlay refuses a second lower layer nested in the first, so extra files are copied on top.
[ -n "$extra" ] && cp -a "$extra/." "$m/"
for dir in "$@"; do
  mkdir -p "$m$dir"
  mount --bind "$dir" "$m$dir"
  mount -o remount,bind,ro "$m$dir"
done
mount -t proc proc "$m/proc"
mount -t sysfs -o ro sysfs "$m/sys"
mount -t cgroup2 cgroup2 "$m/sys/fs/cgroup"
mount -t tmpfs -o size=4m,mode=755 dev "$m/dev"
for node in null zero full random urandom tty; do
  touch "$m/dev/$node"; mount --bind "/dev/$node" "$m/dev/$node"
done
mkdir -p "$m/dev/pts" "$m/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$m/dev/pts"
ln -s pts/ptmx "$m/dev/ptmx"
mount -t tmpfs -o mode=1777 shm "$m/dev/shm"
mount -t tmpfs -o mode=755 run "$m/run"
mount -t tmpfs -o mode=1777 tmp "$m/tmp"
rm -f "$m/etc/machine-id"
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$m/etc/machine-id"; echo >> "$m/etc/machine-id"
units=$m/etc/systemd/system
mkdir -p "$units"
cat > "$units/vigil-e2e.target" <<'UNIT'
[Unit]
Description=Vigil end-to-end test target
Requires=sysinit.target sockets.target
After=sysinit.target sockets.target
AllowIsolate=yes
UNIT
# Units that would touch the host's hardware, network, terminals or clock stay masked.
for unit in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
  systemd-udev-trigger.service systemd-udev-settle.service systemd-networkd.service \
  systemd-resolved.service systemd-timesyncd.service systemd-logind.service getty.target \
  console-getty.service systemd-remount-fs.service systemd-sysctl.service systemd-modules-load.service \
  systemd-binfmt.service systemd-hwdb-update.service systemd-random-seed.service \
  systemd-firstboot.service systemd-pcrphase-sysinit.service systemd-pcrphase.service \
  proc-sys-fs-binfmt_misc.automount sys-kernel-debug.mount sys-kernel-tracing.mount \
  sys-kernel-config.mount sys-fs-fuse-connections.mount dev-hugepages.mount dev-mqueue.mount \
  systemd-journald-audit.socket systemd-journal-flush.service cron.service ssh.service \
  systemd-tmpfiles-setup-dev.service kmod-static-nodes.service systemd-repart.service \
  ldconfig.service systemd-update-utmp.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer fstrim.timer man-db.timer systemd-boot-update.service; do
  ln -sf /dev/null "$units/$unit"
done
cd "$m"
mkdir -p .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
rmdir /.oldroot 2>/dev/null || true
# Shared propagation, as on a booted host: systemd mounts a unit's credentials (LoadCredential=)
# from a helper's namespace and moves them into place, which a private root never sees.
mount --make-rshared /
export container=vigil-e2e
exec /lib/systemd/systemd --system --unit=vigil-e2e.target --log-target=journal-or-kmsg --log-level=info </dev/null
STAGE2

cgroups=$work/cgroup
mkdir -p "$cgroups"
log=$work/systemd.log
# A private mount namespace with a cgroup2 hierarchy of its own; the sandbox's cgroup becomes the
# root of the new cgroup namespace, where systemd manages its units. The cgroup is this boot's
# own: sandboxes booted at once (run.sh's versions) would otherwise share one tree, and one
# systemd would kill the other's processes and remove its cgroups. When systemd is gone, the
# tree it left is removed.
unshare --mount --propagation private bash -c '
  set -e
  cgroup=vigil-e2e-$2
  mount -t cgroup2 cgroup2 "$1"
  # Relative paths from here on: the caller may remove WORKDIR while this cleans up.
  cd "$1"
  mkdir "$cgroup"
  bash -c "echo \$\$ > $cgroup/cgroup.procs; exec unshare --pid --fork --cgroup --uts --ipc --net --kill-child bash \"\$@\"" \
    sandbox "${@:3}" &
  wait $! || true
  for _ in $(seq 1 50); do
    find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ -d "$cgroup" ] || break
    sleep 0.1
  done
' vigil-e2e "$cgroups" "$$" "$stage2" "$work" "$extra" "$lower" "${binds[@]}" >"$log" 2>&1 &
outer=$!
for _ in $(seq 1 200); do
  pid=$(cat "$work/pid" 2>/dev/null || true)
  [ -n "$pid" ] && break
  kill -0 "$outer" 2>/dev/null || break
  sleep 0.02
done
[ -n "${pid:-}" ] || { echo "systemd did not start; log:" >&2; cat "$log" >&2; exit 1; }
# Wait until the manager answers on its private socket.
for _ in $(seq 1 200); do
  state=$(nsenter -t "$pid" -a systemctl is-system-running 2>/dev/null || true)
  case $state in running|degraded) echo "$pid"; exit 0 ;; esac
  sleep 0.02
done
echo "systemd $pid did not come up; state: ${state:-none}; log:" >&2
cat "$log" >&2
kill -s SIGRTMIN+4 "$pid" 2>/dev/null || true
exit 1
