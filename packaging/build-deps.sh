#!/bin/sh
# Installs what building, testing and packaging Vigil needs besides the Swift toolchain:
# libsystemd's headers, pkg-config, dpkg-dev, and for the end-to-end suite python3 and systemd;
# with --package also lintian and man-db.
# Safe to run again; does nothing when all is there.
set -eu
missing=""
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if ! pkg-config --exists libsystemd 2>/dev/null; then missing="$missing libsystemd-dev"; fi
# The end-to-end suite reads journal JSON with python3 and boots systemd (both on Debian images).
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
[ -x /lib/systemd/systemd ] || missing="$missing systemd"
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
