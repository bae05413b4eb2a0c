#!/usr/bin/env bash
# Builds vigild_<version>_<arch>.deb with dpkg-deb: the release binary (a static executable:
# Swift standard library and libc linked in, no shared object at all; stripped), the unit, the default configuration as a conffile in /etc/vigild/,
# docs, and maintainer scripts that follow Debian's conventions for services (what
# dh_installsystemd generates). The package needs no Swift toolchain on the target.
#
#   packaging/build-deb.sh [OUTPUT_DIR]      (default: the project directory)
set -euo pipefail
project=$(cd "$(dirname "$0")/.." && pwd)
output=${1:-$project}
cd "$project"
sh packaging/build-deps.sh --package
version=$(sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/vigild/Vigild.swift)
arch=$(dpkg --print-architecture)
# The release executable as the benchmarks measure it (static; build-vigild.sh says why).
binary=$(packaging/build-vigild.sh)
stage=$(mktemp -d /tmp/vigild-deb.XXXXXX)
trap 'rm -rf "$stage"' EXIT
package=$stage/vigild_${version}_${arch}
install -D -m 0755 "$binary" "$package/usr/bin/vigild"
strip --strip-unneeded --remove-section=.comment "$package/usr/bin/vigild"
install -D -m 0644 systemd/vigild.service "$package/lib/systemd/system/vigild.service"
install -D -m 0644 packaging/vigild.json "$package/etc/vigild/vigild.json"
install -D -m 0644 README.md "$package/usr/share/doc/vigild/README.md"
install -D -m 0644 systemd/README.md "$package/usr/share/doc/vigild/systemd.md"
# The maintainer: Debian's DEBFULLNAME/DEBEMAIL when set (dch uses them too), else the project's.
maintainer="${DEBFULLNAME:-Vigil Maintainers} <${DEBEMAIL:-maintainers@vigil.example.org}>"
cat > "$package/usr/share/doc/vigild/copyright" <<TEXT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: vigil
Upstream-Contact: $maintainer

Files: *
Copyright: 2026 The Vigil Authors
License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this file except in compliance with the License. You may obtain a copy of
 the License at http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 License for the specific language governing permissions and limitations under
 the License.
 .
 On Debian systems, the full text of the Apache License, Version 2.0 can be
 found in the file /usr/share/common-licenses/Apache-2.0.
TEXT
# A native package's changelog, with the maintainer of this build in its trailer line.
sed "s/^ -- .*  \(.*\)$/ -- $maintainer  \1/" packaging/changelog | gzip -9n > "$stage/changelog.gz"
install -D -m 0644 "$stage/changelog.gz" "$package/usr/share/doc/vigild/changelog.gz"
# Manual pages, the journal catalog (Debian's systemd package rebuilds the catalog database by a
# dpkg trigger on /usr/lib/systemd/catalog), bash completion.
for page in man/vigild.8 man/vigild.json.5; do
  section=${page##*.}
  gzip -9n < "$page" > "$stage/$(basename "$page").gz"
  install -D -m 0644 "$stage/$(basename "$page").gz" "$package/usr/share/man/man$section/$(basename "$page").gz"
done
install -D -m 0644 systemd/vigil.catalog "$package/usr/lib/systemd/catalog/vigild.catalog"
install -D -m 0644 packaging/vigild.bash-completion "$package/usr/share/bash-completion/completions/vigild"
install -D -m 0644 packaging/lintian-overrides "$package/usr/share/lintian/overrides/vigild"

# The shared libraries the binary links, as package dependencies with the minimum versions
# their symbols need (dpkg-shlibdeps wants a debian/control to run from). The static binary
# links none (checked above), so there is no Depends: line, and no package is needed at run time.
mkdir -p "$stage/shlibs/debian"
printf 'Source: vigild\n\nPackage: vigild\nArchitecture: any\n' > "$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -e "$package/usr/bin/vigild" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
depends_line=${depends:+Depends: $depends
}

mkdir -p "$package/DEBIAN"
cat > "$package/DEBIAN/control" <<TEXT
Package: vigild
Version: $version
Architecture: $arch
Maintainer: $maintainer
${depends_line}Section: admin
Priority: optional
Description: Vigil reference daemon for systemd
 A small heartbeat service built with the Vigil Swift toolkit: typed lifecycle
 events from signals and systemd, two-phase configuration reload that keeps the
 old configuration on error, crash-safe state, native journal logging and a
 watchdog that pings only when the daemon is healthy.
TEXT
echo /etc/vigild/vigild.json > "$package/DEBIAN/conffiles"
(cd "$package" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$package/DEBIAN/md5sums"

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
deb=$output/vigild_${version}_${arch}.deb
dpkg-deb --root-owner-group --build "$package" "$deb" >/dev/null
# Debian's policy checker: no error and no warning may remain (informational tags are listed).
lintian --fail-on error,warning --info "$deb" >&2
echo "$deb"
