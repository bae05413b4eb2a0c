#!/bin/sh
# Installs what building and testing Vigil needs besides the Swift toolchain:
# libsystemd's headers and pkg-config. Safe to run again; does nothing when all is there.
set -eu
missing=""
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if ! pkg-config --exists libsystemd 2>/dev/null; then missing="$missing libsystemd-dev"; fi
# dpkg-shlibdeps (packaging/build-deb.sh) comes with dpkg-dev.
command -v dpkg-shlibdeps >/dev/null 2>&1 || missing="$missing dpkg-dev"
[ -z "$missing" ] && exit 0
echo "Installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
