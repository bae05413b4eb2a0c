#!/usr/bin/env bash
# Makes a Debian 13 (trixie) root with its systemd 257 in DIR, for the end-to-end suite: bookworm's
# glibc cannot run systemd 257, so boot-systemd.sh --root DIR boots it from this root instead of
# laying it over the host's. debootstrap (installed from apt when missing) fetches it from
# Debian's archive, like fetch-systemd-254.sh. Needs root.
#
#   fetch-debian-13.sh DIR
#
# DIR is kept across runs (lib.sh uses /var/cache/vigil-e2e/trixie): a root that was completed
# with the package list below is used as it is; an incomplete one (an interrupted run) or one
# made with another list is made again. Concurrent runs wait for each other (flock).
set -euo pipefail
dir=$1
# Besides systemd, what the checks run inside the sandbox: python3 (journal JSON, probes,
# request loops), procps (kill), man-db and bash-completion (the package test). A section that
# runs another tool in the sandbox adds its package here.
packages=systemd,python3,procps,man-db,bash-completion,fuse3,python3-fusepy
marker=$dir/.vigil-e2e-packages
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
[ -x "$dir/usr/lib/systemd/systemd" ] && [ "$(cat "$marker" 2>/dev/null)" = "$packages" ] && exit 0
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "# installing debootstrap" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
# unmount_under DIR: debootstrap can leave DIR/proc mounted (here it does when it ends): unmount
# whatever is mounted under DIR, deepest first, so that nothing below is removed or kept mounted.
unmount_under() {
  local target
  awk -v dir="$1/" 'index($2 "/", dir) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r target; do umount -l "$target"; done
}
started=$SECONDS
unmount_under "$dir"
unmount_under "$dir.partial"
rm -rf --one-file-system "$dir" "$dir.partial"
log=$dir.log
if ! debootstrap --variant=minbase --include="$packages" trixie "$dir.partial" http://deb.debian.org/debian >"$log" 2>&1; then
  unmount_under "$dir.partial"
  echo "debootstrap of Debian 13 into $dir.partial failed; the end of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
unmount_under "$dir.partial"
rm -f "$dir.partial"/var/cache/apt/archives/*.deb
echo "$packages" >"$dir.partial/.vigil-e2e-packages"
mv "$dir.partial" "$dir"
echo "# made a Debian 13 root in $dir ($((SECONDS - started)) s, $(du -smx "$dir" | cut -f1) MiB)" >&2
