#!/usr/bin/env bash
# What systemd spends on each notification it reads: the figure behind the process benchmark's
# reader (`--reader-work-us`, README "What systemd sees").
#
#   bash Benchmarks/systemd-reader.sh [COUNT]     (as root; about half a minute)
#
# Boots the host's systemd as PID 1 of its own namespaces (Tests/EndToEnd/boot-systemd.sh), runs
# a Type=notify service that sends COUNT (default 2000) `RELOADING=1` + `READY=1` pairs, 2 ms
# apart, then COUNT `STATUS=` lines, and reads systemd's CPU time (utime + stime of PID 1, from
# /proc) before and after each series. The sender is Python: its own cost is not counted, only
# systemd's. systemd is powered off at the end, also when something fails.
set -euo pipefail
project=$(cd "$(dirname "$0")/.." && pwd)
count=${1:-2000}
case $count in '' | *[!0-9]*) echo "systemd-reader.sh: COUNT must be a number" >&2; exit 2 ;; esac
command -v python3 >/dev/null || { echo "systemd-reader.sh: needs python3" >&2; exit 2; }
work=$(mktemp -d /tmp/vigil-systemd-reader.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -s SIGRTMIN+4 "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
pid=$(bash "$project/Tests/EndToEnd/boot-systemd.sh" "$work/sd")
nsenter -t "$pid" -a systemctl is-system-running --wait >/dev/null || true
root=/proc/$pid/root
cat > "$root/run/sender.py" <<'PYTHON'
import os, socket, sys, time
count, mode = int(sys.argv[1]), sys.argv[2]
address = os.environ["NOTIFY_SOCKET"]
if address.startswith("@"):
    address = "\0" + address[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(address)
s.send(b"READY=1")
open("/run/sender.ready", "w").close()
while not os.path.exists("/run/sender.go"):
    time.sleep(0.01)
for i in range(count):
    if mode == "reload":
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        s.send(b"RELOADING=1\nMONOTONIC_USEC=%d\nSTATUS=Reloading" % now)
        time.sleep(0.002)
        s.send(b"STATUS=Running (generation %d); reload applied\nREADY=1" % i)
    else:
        s.send(b"STATUS=tick %d" % i)
    time.sleep(0.002)
open("/run/sender.done", "w").close()
time.sleep(3600)
PYTHON
ticks=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
version=$(nsenter -t "$pid" -a systemctl --version | head -1)
echo "$version, $(nproc) CPUs; $count of each, 2 ms apart"
for mode in reload status; do
  rm -f "$root/run/sender.ready" "$root/run/sender.go" "$root/run/sender.done"
  nsenter -t "$pid" -a systemd-run --quiet --unit="sender-$mode" -p Type=notify -p NotifyAccess=main \
    /usr/bin/python3 /run/sender.py "$count" "$mode"
  while [ ! -e "$root/run/sender.ready" ]; do sleep 0.05; done
  sleep 0.5
  before=$(cpu)
  touch "$root/run/sender.go"
  while [ ! -e "$root/run/sender.done" ]; do sleep 0.05; done
  after=$(cpu)
  datagrams=$count
  [ "$mode" = reload ] && datagrams=$((count * 2))
  microseconds=$(((after - before) * 1000000 / ticks))
  case $mode in
    reload) what="RELOADING=1 or READY=1 (with STATUS=)" ;;
    status) what="STATUS= alone" ;;
  esac
  echo "systemd's CPU per $what: $((microseconds / datagrams)) µs ($microseconds µs for $datagrams datagrams)"
  nsenter -t "$pid" -a systemctl stop "sender-$mode"
done
