#!/usr/bin/env bash
# hello-http's end-to-end test: installs the example as a systemd unit (and its .socket unit) in a
# real systemd 252, 254 and 257 at once, each booted in its own namespaces by the project's
# Tests/EndToEnd/lib.sh (which says where each version comes from; VIGIL_E2E_SYSTEMD=257 runs
# one), and checks what an admin and a client see. Needs root.
#
#   run.sh HELLO_HTTP_BINARY
#
# Prints one line per check, each naming its systemd ("257: …"), and a closing
# "N passed, M failed"; exits non-zero if any failed.
# Each systemd it boots is powered off on exit, whatever happens. Requests go over the sandbox's
# own loopback (client.py, python3), in bounded loops.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
example=$(cd "$here/../.." && pwd)
project=$(cd "$example/../.." && pwd)
e2e=$project/Tests/EndToEnd
binary=$(realpath "$1")
work=$(mktemp -d /tmp/hello-http-e2e.XXXXXX)
# shellcheck source=../../../../Tests/EndToEnd/lib.sh
. "$e2e/lib.sh"
per_systemd_version "252 254 257" "$0" "$binary"

# wait_until SECONDS COMMAND...: polls a state that has no event to await (systemctl show).
wait_until() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && { echo "timed out after ${limit}s waiting for: $*"; return 1; }
    sleep 0.05
  done
}
show() { in_sandbox systemctl show -P "$1" hello-http; }
cursor() { in_sandbox journalctl -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'; }
# await_entry SECONDS CURSOR PYTHON_CONDITION: waits (following the journal of hello-http.service
# and of systemd about it) for an entry after CURSOR for which the condition on `e` holds.
await_entry() {
  local limit=$1 after=$2 condition=$3
  timeout "$limit" nsenter -t "$pid" -a journalctl -u hello-http.service -o json --no-pager --follow \
    --after-cursor="$after" |
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
request() { in_sandbox python3 /tmp/client.py "$@"; }
write_config() { printf '%s\n' "$1" > "$root/etc/hello-http/hello-http.json"; }
export -f wait_until show cursor await_entry request in_sandbox

# suite VERSION: every check against the systemd at $pid (check names the version).
suite() {
  local v=$1
  root=/proc/$pid/root
  install -m 0755 "$binary" "$root/usr/bin/hello-http"
  install -m 0644 "$example/systemd/hello-http.service" "$example/systemd/hello-http.socket" "$root/etc/systemd/system/"
  install -m 0644 "$here/client.py" "$root/tmp/client.py"
  mkdir -p "$root/etc/hello-http"
  export root
  write_config '{ "greeting": "hello one" }'
  in_sandbox systemctl daemon-reload

  check "systemd-analyze verify is clean for both units" bash -c "
    out=\$(nsenter -t $pid -a systemd-analyze verify /etc/systemd/system/hello-http.service /etc/systemd/system/hello-http.socket 2>&1)
    echo \"\$out\"; [ -z \"\$out\" ]"

  check "systemd-analyze security: exposure 1.5 or less, as for vigild" bash -c "
    nsenter -t $pid -a systemd-analyze security hello-http.service | tail -1 | tee /dev/stderr |
    python3 -c 'import re,sys; v=float(re.search(r\"level for hello-http.service: ([0-9.]+)\", sys.stdin.read()).group(1)); sys.exit(0 if v <= 1.5 else 1)'"

  # --- readiness: READY=1 follows the bind, so nothing is refused once start returns ---
  local counts
  counts=$(in_sandbox bash -c 'systemctl start hello-http && python3 /tmp/client.py burst 50 /')
  check "0 of 50 requests refused right after systemctl start returns (answered refused failed: $counts)" \
    test "$counts" = "50 0 0"
  check "GET / answers the configured greeting" bash -c '[ "$(request get /)" = "hello one" ]'
  check "it bound 127.0.0.1:8080 itself (no .socket unit)" bash -c "
    nsenter -t $pid -a journalctl -u hello-http --no-pager -o cat | grep -qF 'Serving HTTP on 127.0.0.1:8080 (bound here)'"

  # --- reload: the outcome is the truth ---
  local main_pid; main_pid=$(show MainPID)
  write_config '{ "greeting": "hello two" }'
  check "a good systemctl reload exits 0 and the next request has the new greeting" bash -c '
    in_sandbox systemctl reload hello-http && [ "$(request get /)" = "hello two" ]'
  write_config '{ "greeting": "bad\u0007bell" }'
  check "a bad systemctl reload exits 1" bash -c 'in_sandbox systemctl reload hello-http; rc=$?; echo "exit $rc"; [ $rc = 1 ]'
  check "after the bad reload the old greeting is still served by the same process" bash -c "
    [ \"\$(request get /)\" = 'hello two' ] && [ \"\$(show MainPID)\" = $main_pid ] && [ \"\$(show ActiveState)\" = active ]"
  check "systemctl status names the rejected key" bash -c "
    out=\$(nsenter -t $pid -a systemctl status --no-pager -n 20 hello-http); echo \"\$out\" | tail -5
    echo \"\$out\" | grep -q 'greeting: must not contain control characters'"
  check "/metrics shows vigil_reloads_total moved (1 applied, 1 rejected)" bash -c "
    out=\$(request get /metrics); echo \"\$out\" | grep vigil_reloads
    echo \"\$out\" | grep -qx 'vigil_reloads_total{result=\"applied\"} 1' &&
    echo \"\$out\" | grep -qx 'vigil_reloads_total{result=\"rejected\"} 1'"
  write_config '{ "greeting": "hello three" }'
  in_sandbox systemctl reload hello-http

  # --- the journal carries each request's fields ---
  check "the journal has a request entry with HTTP_METHOD, HTTP_PATH, HTTP_STATUS, HTTP_DURATION_MS" bash -c "
    nsenter -t $pid -a journalctl -u hello-http -o json --no-pager | python3 -c '
import json, sys
for e in map(json.loads, sys.stdin):
    if e.get(\"HTTP_METHOD\") == \"GET\" and e.get(\"HTTP_PATH\") == \"/\" and e.get(\"HTTP_STATUS\") == \"200\" and \"HTTP_DURATION_MS\" in e:
        print(e[\"MESSAGE\"]); sys.exit(0)
sys.exit(1)'"

  # --- drain: an in-flight request completes across systemctl stop ---
  local before; before=$(cursor)
  in_sandbox python3 /tmp/client.py get /slow > "$work/slow.$v" 2>&1 &
  local slow=$!
  await_entry 10 "$before" "e.get('MESSAGE', '').startswith('Slow request started')" >/dev/null
  local stop_rc slow_rc
  in_sandbox systemctl stop hello-http; stop_rc=$?
  wait "$slow"; slow_rc=$?
  check "systemctl stop waits for the in-flight 3 s request, which completes (Result=success)" bash -c "
    echo \"stop: exit $stop_rc; slow request: exit $slow_rc, body: \$(cat $work/slow.$v)\"
    [ $stop_rc = 0 ] && [ $slow_rc = 0 ] && [ \"\$(cat $work/slow.$v)\" = 'slow response done' ] && [ \"\$(show Result)\" = success ]"

  # --- socket activation: systemd holds the socket, nothing is refused across a restart ---
  in_sandbox systemctl start hello-http.socket
  check "the first connection to hello-http.socket starts the service, which answers" bash -c '
    [ "$(request get /)" = "hello three" ] && [ "$(show ActiveState)" = active ]'
  check "the service adopted the socket systemd passed as 'http'" bash -c "
    nsenter -t $pid -a journalctl -u hello-http --no-pager -o cat | grep -qF 'Serving HTTP on 127.0.0.1:8080 (passed by systemd)'"
  local directory=/tmp/loop-$v loop
  in_sandbox mkdir -p "$directory"
  in_sandbox python3 /tmp/client.py loop "$directory" / > "$work/loop.$v" 2> "$work/loop-errors.$v" &
  loop=$!
  wait_until 10 test -e "$root$directory/answering" && in_sandbox systemctl restart hello-http.service
  touch "$root$directory/restarted"
  wait "$loop"
  counts=$(cat "$work/loop.$v")
  check "0 requests refused across systemctl restart with the .socket unit (answered refused failed: $counts)" bash -c "
    cat $work/loop-errors.$v
    read -r answered refused failed <<< '$counts'; [ \"\$refused\" = 0 ] && [ \"\$failed\" = 0 ] && [ \"\$answered\" -gt 5 ]"
  in_sandbox systemctl stop hello-http.socket hello-http.service

  # --- the watchdog: a wedged health check gets the unit restarted ---
  mkdir -p "$root/etc/systemd/system/hello-http.service.d"
  printf '[Service]\nEnvironment=HELLO_HTTP_FAILPOINTS=health-wedge\nWatchdogSec=4s\n' \
    > "$root/etc/systemd/system/hello-http.service.d/wedge.conf"
  in_sandbox systemctl daemon-reload
  before=$(cursor)
  in_sandbox systemctl start hello-http
  local wedged_pid; wedged_pid=$(show MainPID)
  check "a wedged health check: the watchdog kills the service and systemd restarts it" bash -c "
    await_entry 30 '$before' \"'Watchdog timeout' in e.get('MESSAGE', '')\" &&
    wait_until 20 bash -c '[ \"\$(show NRestarts)\" -ge 1 ] && [ \"\$(show ActiveState)\" = active ] && [ \"\$(show MainPID)\" != $wedged_pid ]'"
  rm -r "$root/etc/systemd/system/hello-http.service.d"
  in_sandbox systemctl daemon-reload
  in_sandbox systemctl stop hello-http
  in_sandbox systemctl reset-failed
}

echo "# booting systemd ${VIGIL_E2E_SYSTEMD}"
pid=$(boot_systemd "$work/systemd" "$binary") ||
  { echo "FAIL - ${check_prefix}boot systemd"; echo "0 passed, 1 failed"; exit 1; }
export pid
echo "# systemd $(in_sandbox systemctl --version | head -1 | cut -d' ' -f2) running as host pid $pid"
check_booted_version
suite "$VIGIL_E2E_SYSTEMD"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
