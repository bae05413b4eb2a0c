#!/usr/bin/env bash
# Builds vigild_<version>_<arch>.deb with dpkg-deb: the release binary (Swift standard library
# linked statically, stripped), the unit, the default configuration as a conffile in /etc/vigild/,
# docs, and maintainer scripts that follow Debian's conventions for services (what
# dh_installsystemd generates). The package needs no Swift toolchain on the target.
#
#   packaging/build-deb.sh [OUTPUT_DIR]      (default: the project directory)
set -euo pipefail
project=$(cd "$(dirname "$0")/.." && pwd)
output=${1:-$project}
cd "$project"
sh packaging/build-deps.sh
version=$(sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/vigild/Vigild.swift)
arch=$(dpkg --print-architecture)
scratch=$project/.build-release

swift build -c release --static-swift-stdlib --product vigild --scratch-path "$scratch"
stage=$(mktemp -d /tmp/vigild-deb.XXXXXX)
trap 'rm -rf "$stage"' EXIT
package=$stage/vigild_${version}_${arch}
install -D -m 0755 "$scratch/release/vigild" "$package/usr/bin/vigild"
strip --strip-unneeded "$package/usr/bin/vigild"
install -D -m 0644 systemd/vigild.service "$package/lib/systemd/system/vigild.service"
install -D -m 0644 packaging/vigild.json "$package/etc/vigild/vigild.json"
install -D -m 0644 README.md "$package/usr/share/doc/vigild/README.md"
install -D -m 0644 systemd/README.md "$package/usr/share/doc/vigild/systemd.md"
cat > "$package/usr/share/doc/vigild/copyright" <<TEXT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: vigil
Files: *
Copyright: the Vigil authors
License: Apache-2.0
TEXT

# The shared libraries the binary links, as package dependencies with the minimum versions
# their symbols need (dpkg-shlibdeps wants a debian/control to run from).
mkdir -p "$stage/shlibs/debian"
printf 'Source: vigild\n\nPackage: vigild\nArchitecture: any\n' > "$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -e "$package/usr/bin/vigild" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "dpkg-shlibdeps found no dependencies" >&2; exit 1; }

mkdir -p "$package/DEBIAN"
cat > "$package/DEBIAN/control" <<TEXT
Package: vigild
Version: $version
Architecture: $arch
Maintainer: Vigil developers <vigil@localhost>
Depends: $depends
Section: admin
Priority: optional
Description: Vigil reference daemon for systemd
 A small heartbeat service built with the Vigil Swift toolkit: typed lifecycle
 events from signals and systemd, two-phase configuration reload that keeps the
 old configuration on error, crash-safe state, native journal logging and a
 watchdog that pings only when the daemon is healthy.
TEXT
echo /etc/vigild/vigild.json > "$package/DEBIAN/conffiles"

cat > "$package/DEBIAN/postinst" <<'TEXT'
#!/bin/sh
set -e
if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ] || [ "$1" = "abort-deconfigure" ] || [ "$1" = "abort-remove" ]; then
	deb-systemd-helper unmask 'vigild.service' >/dev/null || true
	if deb-systemd-helper --quiet was-enabled 'vigild.service'; then
		deb-systemd-helper enable 'vigild.service' >/dev/null || true
	else
		deb-systemd-helper update-state 'vigild.service' >/dev/null || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then action=restart; else action=start; fi
		deb-systemd-invoke "$action" 'vigild.service' >/dev/null || true
	fi
fi
TEXT
cat > "$package/DEBIAN/prerm" <<'TEXT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
	deb-systemd-invoke stop 'vigild.service' >/dev/null || true
fi
TEXT
cat > "$package/DEBIAN/postrm" <<'TEXT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = "remove" ]; then
	if [ -x "/usr/bin/deb-systemd-helper" ]; then
		deb-systemd-helper mask 'vigild.service' >/dev/null || true
	fi
fi
if [ "$1" = "purge" ]; then
	if [ -x "/usr/bin/deb-systemd-helper" ]; then
		deb-systemd-helper purge 'vigild.service' >/dev/null || true
		deb-systemd-helper unmask 'vigild.service' >/dev/null || true
	fi
	rm -rf /var/lib/private/vigild /var/lib/vigild
fi
TEXT
chmod 0755 "$package/DEBIAN/postinst" "$package/DEBIAN/prerm" "$package/DEBIAN/postrm"
dpkg-deb --root-owner-group --build "$package" "$output/vigild_${version}_${arch}.deb" >/dev/null
echo "$output/vigild_${version}_${arch}.deb"
