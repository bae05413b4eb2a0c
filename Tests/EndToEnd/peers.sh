# Sourced by run.sh under systemd 252 (needs pid, root, check, await_entry, cursor, show,
# wait_until, write_config, in_sandbox). The daemon's peers misbehaving, and early signals
# (issue 10, items 5, 8 and 17). Leaves vigild stopped and its drop-ins removed.

dropped_id=3606d99ed4c147ff9017f354ff5a6bad
dropins="$root/etc/systemd/system/vigild.service.d"

# --- a rejection reason longer than a notify datagram (item 5) ---
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
in_sandbox systemctl start vigild
long=$(printf 'x%.0s' $(seq 1 5000))
write_config "{ \"logLevel\": \"$long\" }"
check "5,000-character logLevel: systemctl reload fails within 10 s instead of hanging" bash -c "
  timeout 10 nsenter -t $pid -a systemctl reload vigild; rc=\$?; echo \"exit \$rc\"; [ \$rc -ne 0 ] && [ \$rc -ne 124 ]"
check "5,000-character logLevel: active, StatusText rejected and bounded" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  s=\$(nsenter -t $pid -a systemctl show -P StatusText vigild) && echo \"\${#s} characters: \${s:0:120}\" &&
  [ \${#s} -le 1024 ] && [[ \$s == *'reload rejected'*logLevel* ]]"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
check "after the long reason a good reload works again" in_sandbox systemctl reload vigild
in_sandbox systemctl stop vigild

# --- journald frozen while the daemon logs (item 8) ---
mkdir -p "$dropins"
printf '[Service]\nWatchdogSec=2s\n' > "$dropins/watchdog.conf"
in_sandbox systemctl daemon-reload
write_config '{ "heartbeat": { "interval": 0.1, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
check "journald frozen: vigild starts (WatchdogSec=2s)" start_unit vigild
frozen_main=$(show MainPID)
frozen_restarts=$(show NRestarts)
journald=$(in_sandbox systemctl show -P MainPID systemd-journald)
before_freeze=$(cursor)
sandbox_kill -STOP "$journald"
# A burst of 200 SIGUSR1 (3 entries each) on top of 10 heartbeats a second.
for _ in $(seq 1 200); do sandbox_kill -USR1 "$frozen_main"; done
beats() { in_sandbox vigild status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["heartbeats"])'; }
first=$(beats)
check "journald frozen: vigild status keeps answering and heartbeats keep counting for 5 s" bash -c "
  last=$first
  for _ in \$(seq 1 10); do
    sleep 0.5
    now=\$(timeout 2 nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"heartbeats\"])') || exit 1
    [ \"\$now\" -gt \"\$last\" ] || { echo \"stuck at \$now\"; exit 1; }
    last=\$now
  done
  echo \"$first -> \$last heartbeats\""
check "journald frozen: systemctl reload completes" timeout 10 nsenter -t "$pid" -a systemctl reload vigild
check "journald frozen: no watchdog kill, same MainPID" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $frozen_main ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P NRestarts vigild)\" = $frozen_restarts ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ]"
sandbox_kill -CONT "$journald"
check "journald resumed: the journal says how many entries were dropped" await_entry 20 "$before_freeze" \
  "e.get('MESSAGE_ID') == '$dropped_id' and int(e.get('VIGIL_DROPPED_ENTRIES', 0)) > 0 and e.get('PRIORITY') == '4' and e.get('_PID') == '$frozen_main'"
check "journald resumed: entries flow again" await_entry 10 "$(cursor)" "e.get('MESSAGE') == 'alive'"
in_sandbox systemctl stop vigild
rm -f "$dropins/watchdog.conf"
in_sandbox systemctl daemon-reload

# --- a signal right after the process exists (item 17) ---
# Deterministic: a drop-in preloads a library whose constructor (the first code the loader runs
# after vigild's preinit array) raises SIGHUP; without the early block that kills the process
# before main, every time ("Failed with result 'protocol'").
cc -shared -fPIC -o "$root/usr/local/lib/vigil-raise.so" -x c - <<'C'
#include <signal.h>
#include <stdlib.h>
__attribute__((constructor)) static void raise_early(void) {
    const char *number = getenv("VIGIL_TEST_RAISE");
    if (number) raise(atoi(number));
}
C
chmod 0755 "$root/usr/local/lib/vigil-raise.so"
printf '[Service]\nEnvironment=LD_PRELOAD=/usr/local/lib/vigil-raise.so VIGIL_TEST_RAISE=1\n' > "$dropins/raise.conf"
in_sandbox systemctl daemon-reload
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
for round in 1 2 3; do
  before=$(cursor)
  in_sandbox systemctl reset-failed vigild 2>/dev/null
  check "SIGHUP before main ($round): start succeeds, no restart, the early SIGHUP becomes a reload" bash -c "
    nsenter -t $pid -a systemctl start vigild &&
    [ \"\$(nsenter -t $pid -a systemctl show -P NRestarts vigild)\" = 0 ] &&
    await_entry 10 '$before' \"e.get('MESSAGE_ID') == '7dd32b12fecb4f54b882f1a4b4061f72'\" &&
    [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ]"
  in_sandbox systemctl stop vigild
done
rm -f "$dropins/raise.conf" "$root/usr/local/lib/vigil-raise.so"
in_sandbox systemctl daemon-reload

# As an admin would: start --no-block, then SIGHUP the moment the main process runs vigild (its
# /proc/PID/exe changed). Before exec the main PID is still systemd's child setting up the
# sandbox (18-85 ms here), and a signal then kills that child: systemd's window, not vigild's;
# Restart=on-failure brings the daemon back. The count is printed, and the daemon must be
# active at the end of every round either way.
early_ok=0
early_rounds=5
for round in $(seq 1 $early_rounds); do
  in_sandbox systemctl reset-failed vigild 2>/dev/null
  in_sandbox systemctl start --no-block vigild
  early=0
  for _ in $(seq 1 400); do
    early=$(show MainPID)
    [ "$early" != 0 ] && break
  done
  timeout 5 nsenter -t "$pid" -a bash -c "until [ \"\$(readlink /proc/$early/exe)\" = /usr/bin/vigild ]; do :; done; kill -HUP $early"
  wait_until 15 bash -c "[ \"\$(nsenter -t $pid -a systemctl show -P SubState vigild)\" = running ]" >/dev/null &&
    [ "$(show MainPID)" = "$early" ] && early_ok=$((early_ok + 1))
  check "SIGHUP right after exec ($round): the unit ends up running" bash -c "
    [ \"\$(nsenter -t $pid -a systemctl show -P SubState vigild)\" = running ]"
  in_sandbox systemctl stop vigild
done
echo "# SIGHUP right after exec: the first process survived $early_ok of $early_rounds rounds"
