#!/bin/sh
# Installs what building, testing and packaging Vigil needs besides the Swift toolchain:
# libsystemd's headers, pkg-config, dpkg-dev, and for the end-to-end suite python3, systemd, fuse3
# and python3-fusepy;
# with --package also lintian and man-db.
# Safe to run again; does nothing when all is there.
set -eu
missing=""
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if ! pkg-config --exists libsystemd 2>/dev/null; then missing="$missing libsystemd-dev"; fi
# The end-to-end suite reads journal JSON with python3 and boots systemd (both on Debian images).
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
[ -x /lib/systemd/systemd ] || missing="$missing systemd"
# A FUSE file system that hangs on demand (Tests/EndToEnd/hangfs.py, issue 21 #7): fuse3 for
# /dev/fuse's tools, python3-fusepy (with libfuse2) for the server, under Debian's python3.
command -v fusermount3 >/dev/null 2>&1 || missing="$missing fuse3"
/usr/bin/python3 -c 'import fusepy' >/dev/null 2>&1 || missing="$missing python3-fusepy"
# dpkg-shlibdeps (packaging/build-deb.sh) comes with dpkg-dev.
command -v dpkg-shlibdeps >/dev/null 2>&1 || missing="$missing dpkg-dev"
# With --package (packaging/build-deb.sh): lintian checks the package; man-db for its pages.
if [ "${1:-}" = --package ]; then
  command -v lintian >/dev/null 2>&1 || missing="$missing lintian"
  command -v man >/dev/null 2>&1 || missing="$missing man-db"
fi
[ -z "$missing" ] && exit 0
echo "Installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
