#!/usr/bin/env bash
# Vigil's in-process benchmarks (Benchmarks/VigilBenchmarks and StderrBenchmarks, on ordo-one/package-benchmark):
# fan-out, in-process reload, journal handler, stderr fallback and notifier, each with its
# target as a static threshold (Thresholds/). Prints package-benchmark's tables (Markdown), then
# each target met or not, and exits non-zero when one is missed.
#
#   bash Benchmarks/in-process.sh      (as root) [package-benchmark options, e.g. --filter Fan-out]
#
# Runs as root in a private mount namespace with a tmpfs on /run: the journal handler and
# sd_journal_sendv write to /run/systemd/journal/socket, which the benchmark binds as a drain
# there, so journald (if any) never sees the entries and the figures are the client's cost.
#
# The run is pinned to one CPU (the last; VIGIL_BENCHMARK_CPUS=all leaves it unpinned, or names
# the CPUs for taskset). vigild runs its daemon on one thread (EventLoopExecutor), but these
# benchmarks cannot install that executor (package-benchmark owns main): on the default
# executor each event hops between pool threads, and across CPUs each hop is a wake-up by
# inter-processor interrupt, which on a virtual machine costs microseconds and varies with the
# host. Pinned, a hop is a switch on one CPU, closer to what vigild does. README "Performance"
# shows both.
set -euo pipefail
benchmarks=$(cd "$(dirname "$0")" && pwd)
cd "$benchmarks"
if [ "$(id -u)" != 0 ]; then
  echo "in-process.sh: run as root (it needs a private mount namespace for /run)" >&2
  exit 2
fi
sh ../packaging/build-deps.sh
# Build outside the namespace (swift build may use /run), in release as package-benchmark does.
swift build -c release --product VigilBenchmarks >&2
swift build -c release --product StderrBenchmarks >&2
# One run, kept as the baseline "current" (.benchmarkBaselines/, ignored by git), then printed and
# checked against Thresholds/ without running again.
cpus=${VIGIL_BENCHMARK_CPUS:-$(($(nproc) - 1))}
pin=(taskset -c "$cpus")
if [ "$cpus" = all ]; then pin=(); fi
"${pin[@]}" unshare --mount --propagation private sh -c '
  mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/systemd/journal && exec "$@"' sh \
  swift package --disable-sandbox --allow-writing-to-package-directory benchmark baseline update current \
  --no-progress "$@" >&2
swift package --disable-sandbox benchmark baseline read current --format markdown --no-progress
checked=$(mktemp /tmp/vigil-in-process.XXXXXX)
trap 'rm -f "$checked"' EXIT
swift package --disable-sandbox benchmark thresholds check current --format markdown --no-progress \
  >"$checked" 2>&1 || true
# The check prints a table per metric that is worse or better than its target (nothing when
# exactly at it); its exit status does not come through `swift package` (always 1 on a
# deviation), so the verdict is read from what it printed.
echo
echo "| Benchmark | Metric (p90) | Result | Target | Met |"
echo "| --- | --- | ---: | ---: | :---: |"
awk '
  /^Deviations worse than threshold for /  { met = "**no**"; sub(/^[^:]*:/, ""); name = $0; next }
  /^Deviations better than threshold for / { met = "yes";    sub(/^[^:]*:/, ""); name = $0; next }
  /^\| / && /, Δ\)/ {
    split($0, cell, "|"); metric = cell[2]; unit = metric
    sub(/^ */, "", metric); sub(/ *\([^()]*, Δ\) *$/, "", metric)
    sub(/^.*\(/, "", unit); sub(/, Δ\).*$/, "", unit); unit = (unit == "#") ? "" : " " unit
    next
  }
  /^\| p90 / { split($0, cell, "|"); gsub(/ /, "", cell[3]); gsub(/ /, "", cell[4])
               printf "| %s | %s | %s%s | ≤ %s%s | %s |\n", name, metric, cell[4], unit, cell[3], unit, met }
' "$checked"
echo
if grep -q "is WORSE than the defined thresholds" "$checked"; then
  echo "**At least one in-process target missed.**"
  exit 2
elif grep -q -E "is (BETTER than|EQUAL to) the defined thresholds" "$checked"; then
  echo "All in-process targets met."
else
  cat "$checked" >&2
  echo "in-process.sh: the threshold check did not run to the end (see above)" >&2
  exit 1
fi
