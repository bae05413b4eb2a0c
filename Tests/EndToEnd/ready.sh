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
  warnings=$(in_sandbox journalctl -u vigild -o json --no-pager --after-cursor="$ready_before" | python3 -c "
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

rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload
in_sandbox systemctl reset-failed vigild 2>/dev/null || true
