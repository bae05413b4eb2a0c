#!/usr/bin/env bash
# Vigil's process benchmarks, in one run: builds vigild exactly as the .deb ships it (release,
# Swift standard library static, stripped), the C floor (floor/vigil-floor.c, libsystemd), the Go
# peer (peers/go, go-systemd from Debian), the language floor (peers/hello, a static-stdlib Swift
# hello-world) and the harness (Sources/vigil-process-benchmarks), then runs the four alternately
# and prints a Markdown table ready to paste, each target met or not.
#
#   bash Benchmarks/run.sh      (as root) [--cycles N] [--reloads N] [--reload-gap-ms N] [--reader-work-us N] [--idle-seconds N]
#
# Installs with apt what is missing (libsystemd-dev via packaging/build-deps.sh, golang-go,
# golang-github-coreos-go-systemd-dev). Runs as root: the daemons run in a private mount
# namespace with a tmpfs on /run, where vigild's runtime directory lives, as it would under
# systemd; nothing on the host's /run is touched. The in-process benchmarks are
# Benchmarks/in-process.sh.
set -euo pipefail
benchmarks=$(cd "$(dirname "$0")" && pwd)
project=$(dirname "$benchmarks")
cd "$project"
if [ "$(id -u)" != 0 ]; then
  echo "run.sh: run as root (it needs a private mount namespace for /run)" >&2
  exit 2
fi
sh packaging/build-deps.sh
if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/github.com/coreos/go-systemd/daemon ]; then
  echo "# installing golang-go golang-github-coreos-go-systemd-dev (the Go peer)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    golang-go golang-github-coreos-go-systemd-dev >/dev/null
fi
work=$(mktemp -d /tmp/vigil-benchmarks.XXXXXX)
# The daemons' state directories and logs (stdout and stderr to a file each, as
# StandardOutput=file: would): on tmpfs, as notifybench's runs with --tmp-dir /dev/shm, so that
# a stop times the daemon's work, not the shared disk's fsyncs (1-14 ms here, from run to run).
state=$(mktemp -d /dev/shm/vigil-benchmarks.XXXXXX)
trap 'rm -rf "$work" "$state"' EXIT

echo "# building (release)" >&2
# vigild exactly as packaging/build-deb.sh builds it (the same script, the same flags).
vigild=$(bash packaging/build-vigild.sh)
swift build -c release --package-path "$benchmarks" --product vigil-process-benchmarks \
  --scratch-path "$benchmarks/.build-release" >&2
install -m 0755 "$vigild" "$work/vigild"
cc -O2 -Wall -Wextra -o "$work/vigil-floor" "$benchmarks/floor/vigil-floor.c" $(pkg-config --cflags --libs libsystemd)
GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$work/go-cache" \
  go build -o "$work/vigil-go-peer" "$benchmarks/peers/go/main.go"
swiftc -O -static-stdlib -module-cache-path "$work/module-cache" \
  -o "$work/vigil-swift-hello" "$benchmarks/peers/hello/main.swift"
strip --strip-unneeded "$work/vigild" "$work/vigil-floor" "$work/vigil-go-peer" "$work/vigil-swift-hello"
cat > "$work/benchmark.json" <<'JSON'
{ "heartbeat": { "interval": 0 }, "persistence": { "checkpointInterval": 0 } }
JSON

echo "# $(nproc) CPUs, $(uname -r), $(swift --version 2>&1 | head -1), $(go version)" >&2
unshare --mount --propagation private sh -c '
  mount -t tmpfs -o mode=0755 tmpfs /run && exec "$@"' sh \
  "$benchmarks/.build-release/release/vigil-process-benchmarks" \
  --vigild "$work/vigild" --floor "$work/vigil-floor" \
  --go-peer "$work/vigil-go-peer" --swift-hello "$work/vigil-swift-hello" \
  --configuration "$work/benchmark.json" \
  --work-directory "$state/work" --runtime-directory /run/vigil-benchmarks "$@"
