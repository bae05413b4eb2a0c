# Readiness and no false alarms under systemd 252 (issue 11, item 4); sourced by run.sh after
# client.sh, with vigild installed and stopped. Uses run.sh's helpers (check, await_entry, cursor,
# show, in_sandbox, write_config).
echo "# ready: health budgets against WatchdogSec=, a quiet watchdog while draining, LimitNICE="
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
mkdir -p "$root/etc/systemd/system/vigild.service.d"
# WatchdogSec=2s: the probe waits 0.5 s, a quarter of it, less than the default 2 s health budget.
printf '[Service]\nWatchdogSec=2s\nEnvironment=VIGIL_FAILPOINTS=stop-slow\n' \
  > "$root/etc/systemd/system/vigild.service.d/ready.conf"
in_sandbox systemctl daemon-reload
ready_before=$(cursor)
in_sandbox systemctl start vigild

ready_budget_warning() {
  # One warning, at start, naming every listener whose health budget was cut.
  local warnings
  local from=()
  [ -n "$ready_before" ] && from=(--after-cursor="$ready_before")
  warnings=$(in_sandbox journalctl -u vigild -o json --no-pager "${from[@]}" | python3 -c "
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e.get('MESSAGE', '').startswith('Health budget'):
        print(e.get('PRIORITY'), e['MESSAGE'])
")
  echo "$warnings"
  [ "$(printf '%s\n' "$warnings" | grep -c .)" = 1 ] &&
    printf '%s\n' "$warnings" | grep -q "^4 .*'configuration' (2.0 seconds).*'heartbeat' (2.0 seconds).*cut to 0.5 seconds"
}
check "ready: at WatchdogSec=2s one warning names each listener whose health budget was cut" ready_budget_warning

ready_quiet_drain() {
  # The stop-slow failpoint makes the stop take 4 s: two ping intervals of WatchdogSec=2s pass
  # with no ping, as systemd expects after STOPPING=1, and without a false watchdog-fault entry.
  local stop_cursor result fault
  stop_cursor=$(cursor)
  in_sandbox systemctl stop vigild || return 1
  result=$(show Result)
  fault=$(in_sandbox journalctl -u vigild -o json --no-pager --after-cursor="$stop_cursor" |
    grep -c '079016620c1947ea917c4086c8f486fc')
  echo "Result=$result watchdog-fault entries during the stop: $fault"
  in_sandbox journalctl -u vigild --no-pager --after-cursor="$stop_cursor" | tail -8
  [ "$result" = success ] && [ "$fault" = 0 ] &&
    in_sandbox journalctl -u vigild --no-pager --after-cursor="$stop_cursor" | grep -q 'Failpoint stop-slow'
}
check "ready: a 4 s drain under WatchdogSec=2s ends with Result=success and no watchdog-fault entry" ready_quiet_drain

# libdispatch's event-manager thread asks for nice -4; LimitNICE=-4 (RLIMIT_NICE 24) lets it.
check "ready: the unit allows nice -4 (LimitNICE=, for libdispatch's manager thread)" \
  bash -c "[ \"\$(nsenter -t $pid -a systemctl show -P LimitNICE vigild)\" = 24 ]"

# Why the watchdog goes quiet while stopping: two notify services under WatchdogSec=2s that send
# STOPPING=1 at SIGTERM and then take 3 s to stop. The one that pings once after STOPPING=1 gets
# its watchdog armed again and is killed by it; the quiet one stops cleanly.
cat > "$root/usr/local/bin/ready-watchdog-probe" <<'PROBE'
#!/usr/bin/python3
import os, signal, socket, sys, time
address = os.environ["NOTIFY_SOCKET"]
if address.startswith("@"): address = "\0" + address[1:]
notify_socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def notify(message): notify_socket.sendto(message.encode(), address)
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
notify("READY=1")
while not stopping:
    notify("WATCHDOG=1"); time.sleep(0.2)
notify("STOPPING=1")
if sys.argv[1] == "ping": notify("WATCHDOG=1")
time.sleep(3)
PROBE
chmod 0755 "$root/usr/local/bin/ready-watchdog-probe"
for mode in ping quiet; do
  printf '[Service]\nType=notify\nExecStart=/usr/local/bin/ready-watchdog-probe %s\nWatchdogSec=2s\n' "$mode" \
    > "$root/etc/systemd/system/ready-watchdog-$mode.service"
done
in_sandbox systemctl daemon-reload
ready_watchdog_after_stopping() {
  in_sandbox systemctl start ready-watchdog-ping ready-watchdog-quiet || return 1
  in_sandbox systemctl stop ready-watchdog-ping ready-watchdog-quiet
  local ping quiet
  ping=$(in_sandbox systemctl show -P Result ready-watchdog-ping)
  quiet=$(in_sandbox systemctl show -P Result ready-watchdog-quiet)
  echo "pinged after STOPPING=1: Result=$ping; quiet: Result=$quiet"
  [ "$ping" = watchdog ] && [ "$quiet" = success ]
}
check "ready: systemd arms the watchdog again on a ping after STOPPING=1 (so vigild stops pinging)" \
  ready_watchdog_after_stopping
in_sandbox systemctl reset-failed ready-watchdog-ping 2>/dev/null || true
rm -f "$root/etc/systemd/system/ready-watchdog-"*.service

rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload
in_sandbox systemctl reset-failed vigild 2>/dev/null || true
