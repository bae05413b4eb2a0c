#!/usr/bin/env bash
# Regenerates packaging/vigild.order: the sections of every function a running vigild executes
# (start to READY, three reloads, stop), which the release link (Package.swift, vigild's
# linkerSettings: gold's --section-ordering-file) places next to each other. Start-up then
# faults in a few 64 KiB blocks of code instead of one per function spread over the binary:
# fewer page faults and less resident text (README "Performance", issue 12). Names the file no
# longer matches are ignored by the linker, so a stale file costs only speed; rerun this after
# changes to what vigild runs.
#
#   packaging/order-file.sh        (needs valgrind; about a minute)
set -euo pipefail
project=$(cd "$(dirname "$0")/.." && pwd)
cd "$project"
command -v valgrind >/dev/null || { echo "order-file.sh: install valgrind first (apt-get install valgrind)" >&2; exit 2; }
scratch=$project/.build-static
binary=$(packaging/build-vigild.sh)
work=$(mktemp -d /tmp/vigild-order.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Valgrind cannot read the binary's DWARF; the symbol table is all it needs.
strip --strip-debug -o "$work/vigild" "$binary"
printf '{ "heartbeat": { "interval": 0 }, "persistence": { "checkpointInterval": 0 } }\n' > "$work/config.json"
# NOTIFY_SOCKET names no socket: the notifier's code runs (each send fails and is logged), as
# under systemd, where stderr then carries <N>-prefixed lines.
NOTIFY_SOCKET=$work/notify valgrind --tool=callgrind --demangle=no --compress-strings=no --callgrind-out-file="$work/callgrind.out" \
  "$work/vigild" run --config "$work/config.json" --state-directory "$work/state" \
  --runtime-directory "$work/run" 2> "$work/valgrind.log" &
daemon=$!
# status.json shows the configuration generation in force once a start or reload is complete.
wait_for() {
  for _ in $(seq 600); do
    grep -q "$1" "$work/run/status.json" 2>/dev/null && return 0
    kill -0 "$daemon" 2>/dev/null || { cat "$work/valgrind.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "order-file.sh: vigild did not reach $1; see $work/valgrind.log" >&2
  exit 1
}
wait_for '"generation": 1,'
for generation in 2 3 4; do
  kill -HUP "$daemon"
  wait_for "\"generation\": $generation,"
done
kill -TERM "$daemon"
wait "$daemon"
# Function names (callgrind's fn= lines) as the sections a function of its own gets
# (.text.NAME, or .text.unlikely.NAME for a cold one). Functions that share their object's
# .text (most of Swift's) cannot be moved one by one.
sed -n 's/^c\{0,1\}fn=\(([0-9]*) \)\{0,1\}//p' "$work/callgrind.out" | grep -v "[ ()'\"]" | grep -v '^0x' |
  LC_ALL=C sort -u | sed "s/^/.text./; p; s/^.text./.text.unlikely./" > packaging/vigild.order
# The linker does not track the order file: remove the executable so that the next build
# links it again with the new order.
rm -f "$scratch"/*/release/vigild
echo "packaging/vigild.order: $(wc -l < packaging/vigild.order) section names; the next build relinks vigild" >&2
