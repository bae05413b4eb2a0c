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
command -v python3 >/dev/null || { echo "order-file.sh: needs python3" >&2; exit 2; }
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
# The functions callgrind saw (its fn= lines), each resolved through the symbol table and the
# link map (vigild.map, written by build-vigild.sh) to the input section that holds it: the
# section is named after its first function, so a merged function (…Tm) or one that shares a
# section is found by address, not by name. A function in a plain .text (the part of the
# standard library that is not split into sections) cannot be moved and is left out.
sed -n 's/^c\{0,1\}fn=\(([0-9]*) \)\{0,1\}//p' "$work/callgrind.out" | LC_ALL=C sort -u > "$work/executed"
nm --defined-only "$binary" > "$work/symbols"
python3 - "$work/executed" "$work/symbols" "$scratch/vigild.map" > packaging/vigild.order <<'PYTHON'
import bisect, sys
executed = set(line.strip() for line in open(sys.argv[1]))
# A function with no symbol (LLVM's private .L__unnamed_N: outlined copies, value witnesses)
# is named by its address; its section, .text..L__unnamed_N, is found by that address. The
# name is the same in every object file, so the order file moves all of them (495 sections, 8
# KiB in all): otherwise each executed one, left where its object put it, faults in a block
# of cold code of its own (47 of them, spread over the Vigil modules' code).
addresses = set(int(name, 16) for name in executed if name.startswith("0x"))
for line in open(sys.argv[2]):
    fields = line.split()
    if len(fields) == 3 and fields[2] in executed:
        addresses.add(int(fields[0], 16))
# gold's map: " .text.NAME  0xADDRESS  0xSIZE  OBJECT", the address on the next line when the
# name is long.
sections, pending = [], None
for line in open(sys.argv[3]):
    fields = line.split()
    if line.startswith(" .text"):
        pending = fields[0]
        fields = fields[1:]
    if pending and len(fields) >= 2 and fields[0].startswith("0x") and fields[1].startswith("0x"):
        address, size = int(fields[0], 16), int(fields[1], 16)
        if size and address:
            sections.append((address, size, pending))
        pending = None
sections.sort()
starts = [section[0] for section in sections]
names = set()
for address in addresses:
    index = bisect.bisect_right(starts, address) - 1
    if index >= 0 and address < sections[index][0] + sections[index][1]:
        name = sections[index][2]
        if name.startswith(".text.") and not name.startswith(".text.unlikely."):
            names.add(name)
        elif name.startswith(".text.unlikely."):
            names.add(".text." + name[len(".text.unlikely."):])
for name in sorted(names):
    print(name)
    print(".text.unlikely." + name[len(".text."):])
PYTHON
# The linker does not track the order file: remove the executable so that the next build
# links it again with the new order.
rm -f "$scratch"/*/release/vigild
echo "packaging/vigild.order: $(wc -l < packaging/vigild.order) section names; the next build relinks vigild" >&2
