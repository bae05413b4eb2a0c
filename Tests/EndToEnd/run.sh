#!/usr/bin/env bash
# Vigil's end-to-end suite: installs vigild as a systemd unit in a real systemd (booted in its own
# namespaces by boot-systemd.sh) and checks what an admin sees: start, journal, reload (good and
# bad), SIGUSR1, stop/start, kill -9, the watchdog. Needs root.
#
#   run.sh VIGILD_BINARY
#
# Runs the whole suite on systemd 252, 254 and 257 at once (lib.sh says where each comes from;
# VIGIL_E2E_SYSTEMD=257 runs one, e.g. while working on a check). Prints one line per check, each
# naming its version ("257: …"), and a closing "N passed, M failed"; exits non-zero if any failed.
# The systemd it boots is powered off on exit, whatever happens.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/../.." && pwd)
binary=$(realpath "$1")
work=$(mktemp -d /tmp/vigil-e2e.XXXXXX)
# The booted systemd's root is an overlay on the host's: a vigild directory a `vigild run` by hand
# as root left on the host shows through it, and systemd then fails the unit's first start
# (it migrates a "pre-existing public StateDirectory=" across the overlay: EXDEV), so every
# check after it fails for a reason that is not the code's. Said plainly instead.
for leftover in /var/lib/vigild /var/lib/private/vigild /var/cache/vigild /var/log/vigild; do
  if [ -e "$leftover" ]; then
    echo "FAIL - the host has $leftover (left by a vigild run by hand as root?); the booted systemd sees it through its root: move it away and run again"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
# shellcheck source=lib.sh
. "$here/lib.sh"
per_systemd_version "252 254 257" "$0" "$binary"
show() { in_sandbox systemctl show -P "$1" vigild; }

# wait_until SECONDS COMMAND...: polls a state that has no event to await (systemctl show).
wait_until() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && { echo "timed out after ${limit}s waiting for: $*"; return 1; }
    sleep 0.05
  done
}

# journal_json [--since-cursor C]: the unit's entries as JSON lines.
journal() { in_sandbox journalctl -u vigild -o json --no-pager "$@"; }
cursor() { in_sandbox journalctl -u vigild -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'; }

# await_entry SECONDS CURSOR PYTHON_CONDITION: waits (following the journal) for an entry after
# CURSOR for which the condition on `e` (a dict) holds.
await_entry() {
  local limit=$1 after=$2 condition=$3
  local from=()
  [ -n "$after" ] && from=(--after-cursor="$after")
  # python3 ends the pipe at the first match; journalctl's SIGPIPE is expected, so judge by python.
  timeout "$limit" nsenter -t "$pid" -a journalctl -u vigild -o json --no-pager --follow "${from[@]}" |
    python3 -c "
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if $condition:
        print(e.get('MESSAGE', ''))
        sys.exit(0)
sys.exit(1)
"
  return "${PIPESTATUS[1]}"
}

export -f await_entry in_sandbox

status_json() { in_sandbox vigild status --json; }
status_field() { status_json | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }

write_config() { printf '%s\n' "$1" > "/proc/$pid/root/etc/vigild/vigild.json"; }

echo "# booting systemd ${VIGIL_E2E_SYSTEMD}"
pid=$(boot_systemd "$work/systemd" "$binary" "$(dirname "$binary")/vigil-socket-probe") ||
  { echo "FAIL - ${check_prefix}boot systemd"; echo "0 passed, 1 failed"; exit 1; }
root=/proc/$pid/root
export pid
echo "# systemd $(in_sandbox systemctl --version | head -1 | cut -d' ' -f2) running as host pid $pid"
check_booted_version

install -m 0755 "$binary" "$root/usr/bin/vigild"
install -m 0644 "$project/systemd/vigild.service" "$root/etc/systemd/system/vigild.service"
mkdir -p "$root/etc/vigild"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
in_sandbox systemctl daemon-reload
check "vigild's shared libraries all resolve in the sandbox" bash -c "
  out=\$(nsenter -t $pid -a ldd /usr/bin/vigild) && ! echo \"\$out\" | grep 'not found'"

check "systemd-analyze verify is clean" bash -c "out=\$(nsenter -t $pid -a systemd-analyze verify /etc/systemd/system/vigild.service 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
check "systemd-analyze security: exposure 1.0 or less" bash -c "
  nsenter -t $pid -a systemd-analyze security vigild.service | tail -1 | tee /dev/stderr |
  python3 -c 'import re,sys; v=float(re.search(r\"level for vigild.service: ([0-9.]+)\", sys.stdin.read()).group(1)); sys.exit(0 if v <= 1.0 else 1)'"

# --- start ---
start=$(cursor)
check "systemctl start returns after readiness" start_unit vigild
check "active, running, with StatusText and MainPID" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P SubState vigild)\" = running ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P StatusText vigild)\" = 'Running (generation 1)' ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" -gt 0 ]"
main_pid=$(show MainPID)
check "started entry: native protocol, MESSAGE_ID, VIGIL_* and CODE_* fields" await_entry 10 "$start" \
  "e.get('MESSAGE_ID') == '61ece635e54942e1b9c1dd26c92678c0' and e.get('_TRANSPORT') == 'journal' and e.get('PRIORITY') == '5' and e.get('SYSLOG_IDENTIFIER') == 'vigild' and e.get('VIGIL_EVENT') == 'started' and e.get('VIGIL_GENERATION') == '1' and all(k in e for k in ('CODE_FILE', 'CODE_LINE', 'CODE_FUNC', 'VIGIL_VERSION', 'VIGIL_DURATION_USEC'))"
check "heartbeat entries carry VIGIL_HEARTBEAT" await_entry 10 "$start" \
  "e.get('MESSAGE') == 'alive' and e.get('VIGIL_HEARTBEAT', '').isdigit() and e.get('PRIORITY') == '6' and e.get('_TRANSPORT') == 'journal'"

# --- good reload ---
write_config '{ "heartbeat": { "interval": 0.3, "message": "changed" }, "persistence": { "checkpointInterval": 0 } }'
check "good reload: systemctl reload exits 0" in_sandbox systemctl reload vigild
check "good reload: vigild status right after shows generation 2 and the new message" bash -c "
  s=\$(nsenter -t $pid -a vigild status --json); echo \"\$s\"
  echo \"\$s\" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"generation\"] == 2 and d[\"heartbeat\"][\"message\"] == \"changed\" and d[\"lastReload\"][\"result\"] == \"applied\" else 1)'"

# --- bad reloads ---
for bad in '{ "heartbeat": { "interval": 0.3, "message": "broken" ' '{ "heartbeat": { "interval": -1, "message": "negative" } }'; do
  write_config "$bad"
  before=$(cursor)
  check "bad reload ($bad): systemctl reload exits non-zero" bash -c "! nsenter -t $pid -a systemctl reload vigild"
  check "bad reload: still active with the same MainPID" bash -c "
    [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
    [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $main_pid ]"
  check "bad reload: StatusText says the reload was rejected" bash -c "
    nsenter -t $pid -a systemctl show -P StatusText vigild | grep -q 'generation 2); reload rejected: configuration: /etc/vigild/vigild.json:'"
  check "bad reload: an error entry with the rejected MESSAGE_ID" await_entry 10 "$before" \
    "e.get('MESSAGE_ID') == '9475ebda59634e2fb407cda3695425bc' and e.get('PRIORITY') == '3' and '/etc/vigild/vigild.json:' in e.get('VIGIL_REASON', '')"
  check "bad reload: the heartbeat goes on with the old settings" await_entry 10 "$before" "e.get('MESSAGE') == 'changed'"
done
check "an invalid value is named by its key" bash -c "
  nsenter -t $pid -a journalctl -u vigild -o json --no-pager MESSAGE_ID=9475ebda59634e2fb407cda3695425bc |
  tail -1 | grep -q 'heartbeat.interval: must be 0 (no heartbeat) or a number of seconds from 0.1 to 86400'"

# --- SIGUSR1 ---
before=$(cursor)
# --kill-who=main: in this sandbox systemd 252 cannot signal a unit's cgroup as a whole (EIO).
check "systemctl kill -s USR1 writes a checkpoint" bash -c "
  nsenter -t $pid -a systemctl kill --kill-who=main -s USR1 vigild &&
  await_entry 10 '$before' \"e.get('VIGIL_EVENT') == 'checkpoint'\" &&
  grep -q '\"count\"' $root/var/lib/private/vigild/state.json"

# --- stop and start ---
check "stop: clean exit" bash -c "
  nsenter -t $pid -a systemctl stop vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainStatus vigild)\" = 0 ]"
saved=$(python3 -c "import json; print(json.load(open('$root/var/lib/private/vigild/state.json'))['heartbeat']['count'])")
check "stop: state saved (count $saved)" test "$saved" -gt 0
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0.2 } }'
before=$(cursor)
check "start again: the count continues" bash -c "
  nsenter -t $pid -a systemctl start vigild &&
  await_entry 10 '$before' \"e.get('MESSAGE') == 'alive' and int(e.get('VIGIL_HEARTBEAT', 0)) == $saved + 1\""

# --- kill -9 ---
before_kill=$(show MainPID)
before=$(cursor)
await_entry 10 "$before" "e.get('MESSAGE') == 'alive' and int(e.get('VIGIL_HEARTBEAT', 0)) >= $saved + 3" >/dev/null
last_saved=$(python3 -c "import json; print(json.load(open('$root/var/lib/private/vigild/state.json'))['heartbeat']['count'])")
in_sandbox systemctl kill --kill-who=main -s KILL vigild
check "kill -9: systemd restarts it" wait_until 15 bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P NRestarts vigild)\" = 1 ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" != $before_kill ]"
check "kill -9: the unclean shutdown is reported" await_entry 10 "$before" \
  "e.get('MESSAGE_ID') == '3e4167fd5a4f4684b69749aba65dd187' and e.get('PRIORITY') == '4'"
check "kill -9: vigild status shows previousShutdownClean false" bash -c "
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"previousShutdownClean\"] is False else 1)'"
check "kill -9: the count is not lost beyond the last checkpoint ($last_saved)" await_entry 10 "$before" \
  "e.get('MESSAGE') == 'alive' and e.get('_PID') == '$(show MainPID)' and int(e.get('VIGIL_HEARTBEAT', 0)) > $last_saved"

# --- watchdog ---
mkdir -p "$root/etc/systemd/system/vigild.service.d"
printf '[Service]\nWatchdogSec=1s\nEnvironment=VIGIL_FAILPOINTS=mediator-stall\n' > "$root/etc/systemd/system/vigild.service.d/stall.conf"
in_sandbox systemctl daemon-reload
in_sandbox systemctl restart vigild
stalled=$(show MainPID)
restarts=$(show NRestarts)
check "watchdog: a wedged mediator gets the daemon killed and restarted" wait_until 20 bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P NRestarts vigild)\" -gt $restarts ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" != $stalled ]"
check "watchdog: systemd logged the watchdog timeout" bash -c "
  nsenter -t $pid -a journalctl -u vigild --no-pager | grep -q 'Watchdog timeout'"
# A wedged mediator cannot stop by itself (its stop waits for the stalled hook's budget).
in_sandbox systemctl kill --kill-who=main -s KILL vigild
rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload
in_sandbox systemctl stop vigild

. "$here/values.sh"

# shellcheck source=disk-full.sh
. "$here/disk-full.sh"
# shellcheck source=hung-fs.sh
. "$here/hung-fs.sh"
# shellcheck source=socket-activation.sh
. "$here/socket-activation.sh"

# shellcheck source=client.sh
. "$here/client.sh"

# --- peers and early signals (issue 10: long STATUS=, frozen journald, early SIGHUP) ---
# shellcheck source=peers.sh
. "$here/peers.sh"

# shellcheck source=ready.sh
. "$here/ready.sh"
# shellcheck source=instance.sh
. "$here/instance.sh"

# shellcheck source=reload-stop.sh
. "$here/reload-stop.sh"
# shellcheck source=units.sh
. "$here/units.sh"
# shellcheck source=limits.sh
. "$here/limits.sh"
# shellcheck source=systemd-features.sh
. "$here/systemd-features.sh"

# shellcheck source=reload-once.sh
. "$here/reload-once.sh"
# shellcheck source=reload-signal.sh
. "$here/reload-signal.sh"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
