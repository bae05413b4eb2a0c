#!/usr/bin/env bash
# Unpacks systemd 254 from Debian's bookworm-backports into DIR (merged-/usr layout), without
# installing it: apt downloads with a private source list, dpkg-deb extracts.
#
#   fetch-systemd-254.sh DIR
#
# DIR is kept across runs (lib.sh uses /var/cache/vigil-e2e/systemd-254): it appears only once
# complete, and concurrent runs wait for each other (flock).
set -euo pipefail
dir=$1
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
[ -x "$dir/usr/lib/systemd/systemd" ] && exit 0
state=$(mktemp -d /tmp/vigil-backports.XXXXXX)
trap 'rm -rf "$state" "$dir.partial"' EXIT
final=$dir
dir=$dir.partial
rm -rf "$dir"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" \
  > "$state/sources.list"
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/debs"
apt=(-o "Dir::Etc::SourceList=$state/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache" -o APT::Sandbox::User=root)
apt-get "${apt[@]}" -qq update
(cd "$state/debs" && apt-get "${apt[@]}" -qq download \
  systemd/bookworm-backports libsystemd-shared/bookworm-backports libsystemd0/bookworm-backports)
mkdir -p "$dir"
for deb in "$state"/debs/*.deb; do dpkg-deb -x "$deb" "$dir"; done
# Debian 12 has a merged /usr: /lib, /bin and /sbin are symlinks, so move files to /usr.
for top in bin sbin lib lib64; do
  if [ -d "$dir/$top" ] && [ ! -L "$dir/$top" ]; then
    mkdir -p "$dir/usr/$top"
    cp -a "$dir/$top/." "$dir/usr/$top/"
    rm -rf "${dir:?}/$top"
  fi
done
"$dir/usr/lib/systemd/systemd" --version >/dev/null 2>&1 || [ -f "$dir/usr/lib/x86_64-linux-gnu/systemd/libsystemd-core-254.so" ]
mv "$dir" "$final"
