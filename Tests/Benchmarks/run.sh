#!/usr/bin/env bash
# Vigil's benchmarks, in one run: builds vigild exactly as the .deb ships it (release, Swift
# standard library static, stripped), the C floor (Tests/Benchmarks/floor/vigil-floor.c) and
# the benchmark executable, then runs them and prints the results as a Markdown table.
#
#   sh packaging/build-deps.sh && bash Tests/Benchmarks/run.sh      (as root) [--cycles N] [--reloads N] [--idle-seconds N]
#
# Runs as root: the benchmarks run in a private mount namespace with a tmpfs on /run, where the
# journal handler's socket (/run/systemd/journal/socket, a drain the benchmark binds) and vigild's
# runtime directory live, as they would under systemd. Nothing on the host's /run is touched.
set -euo pipefail
project=$(cd "$(dirname "$0")/../.." && pwd)
cd "$project"
if [ "$(id -u)" != 0 ]; then
  echo "run.sh: run as root (it needs a private mount namespace for /run)" >&2
  exit 2
fi
scratch=$project/.build-release
work=$(mktemp -d /tmp/vigil-benchmarks.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "# building (release)" >&2
# vigild as packaging/build-deb.sh builds it (a static executable, in the same scratch path);
# the benchmark executable links libsystemd for the raw C comparisons, so it cannot be static.
swift build -c release --static-swift-stdlib -Xswiftc -static-executable --product vigild \
  --scratch-path "$project/.build-static" >&2
swift build -c release --static-swift-stdlib --product vigil-benchmarks --scratch-path "$scratch" >&2
install -m 0755 "$project/.build-static/release/vigild" "$work/vigild"
strip --strip-unneeded "$work/vigild"
cc -O2 -Wall -Wextra -o "$work/vigil-floor" Tests/Benchmarks/floor/vigil-floor.c $(pkg-config --cflags --libs libsystemd)
cat > "$work/benchmark.json" <<'JSON'
{ "heartbeat": { "interval": 0 }, "persistence": { "checkpointInterval": 0 } }
JSON

echo "# $(nproc) CPUs, $(uname -r), $(swift --version 2>&1 | head -1)" >&2
unshare --mount --propagation private sh -c '
  mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/systemd/journal &&
  exec "$@"' sh \
  "$scratch/release/vigil-benchmarks" \
  --vigild "$work/vigild" --floor "$work/vigil-floor" \
  --configuration "$work/benchmark.json" --reference-configuration packaging/vigild.json \
  --work-directory "$work/work" --runtime-directory /run/vigil-benchmarks "$@"
