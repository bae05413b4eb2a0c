#!/usr/bin/env bash
# kv's end-to-end test: installs the example's units (kv.socket + kv.service, as
# `kv systemd-unit` prints them) in a real systemd 252, 254 and 257 at once, each booted in its own
# namespaces by the project's Tests/EndToEnd/lib.sh (which says where each version comes from;
# VIGIL_E2E_SYSTEMD=257 runs one), and checks what an admin and a client see. Needs root.
#
#   run.sh KV_BINARY
#
# Prints one line per check, each naming its systemd ("257: …"), and a closing "N passed, M
# failed"; exits non-zero if any failed.
# Each systemd it boots is powered off on exit, whatever happens. Requests go over the sandbox's
# Unix socket /run/kv.sock (client.py, python3), in bounded loops.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
example=$(cd "$here/../.." && pwd)
project=$(cd "$example/../.." && pwd)
e2e=$project/Tests/EndToEnd
binary=$(realpath "$1")
work=$(mktemp -d /tmp/kv-e2e.XXXXXX)
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
show() { in_sandbox systemctl show -P "$1" kv; }
send() { in_sandbox python3 /tmp/client.py send "$@"; }
cursor() { in_sandbox journalctl -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'; }
# await_entry SECONDS CURSOR CONDITION: follows kv.service's journal after CURSOR until an entry
# `e` (a dict of its fields) for which the Python expression CONDITION holds; prints its MESSAGE.
await_entry() {
  timeout "$1" nsenter -t "$pid" -a journalctl -u kv.service -o json --no-pager --follow --after-cursor="$2" |
    KV_CONDITION=$3 python3 -c 'import json, os, sys
condition = compile(os.environ["KV_CONDITION"], "CONDITION", "eval")
found = next((e for e in map(json.loads, sys.stdin) if eval(condition, {"e": e})), None)
print(found.get("MESSAGE", "") if found else "no such entry")
sys.exit(0 if found else 1)'
  return "${PIPESTATUS[1]}"
}
write_config() { printf '%s\n' "$1" > "$root/etc/kv/kv.json"; }
export -f wait_until show send in_sandbox cursor await_entry

# suite LABEL: every check against the systemd at $pid.
suite() {
  local v=$1
  root=/proc/$pid/root
  install -m 0755 "$binary" "$root/usr/bin/kv"
  # The units are the ones kv prints; the shipped copies in systemd/ must be that output.
  "$binary" systemd-unit > "$root/etc/systemd/system/kv.service"
  "$binary" systemd-unit --socket /run/kv.sock > "$root/etc/systemd/system/kv.socket"
  install -m 0644 "$here/client.py" "$root/tmp/client.py"
  mkdir -p "$root/etc/kv"
  export root
  write_config '{}'
  in_sandbox systemctl daemon-reload

  check "Examples/kv/systemd/kv.service and kv.socket are what kv systemd-unit prints, byte for byte" bash -c "
    cmp '$example/systemd/kv.service' '$root/etc/systemd/system/kv.service' &&
    cmp '$example/systemd/kv.socket' '$root/etc/systemd/system/kv.socket'"
  check "systemd-analyze verify is clean for both units" bash -c "
    out=\$(nsenter -t $pid -a systemd-analyze verify /etc/systemd/system/kv.service /etc/systemd/system/kv.socket 2>&1)
    echo \"\$out\"; [ -z \"\$out\" ]"
  check "systemd-analyze security: exposure 1.5 or less, as for vigild" bash -c "
    nsenter -t $pid -a systemd-analyze security kv.service | tail -1 | tee /dev/stderr |
    python3 -c 'import re,sys; v=float(re.search(r\"level for kv.service: ([0-9.]+)\", sys.stdin.read()).group(1)); sys.exit(0 if v <= 1.5 else 1)'"

  # --- start: the socket unit listens first, so nothing is refused ---
  local counts
  counts=$(in_sandbox bash -c 'systemctl start kv && python3 /tmp/client.py burst 50')
  check "0 of 50 connections refused right after systemctl start returns (answered refused failed: $counts)" \
    test "$counts" = "50 0 0"
  check "the service adopted the socket systemd passed as 'kv'" bash -c "
    nsenter -t $pid -a journalctl -u kv --no-pager -o cat | grep -qF 'Serving /run/kv.sock (passed by systemd)'"
  check "SET is acknowledged and GET reads it back (a value with spaces)" bash -c '
    out=$(send "SET greeting hello big world" "GET greeting" "DEL greeting" "GET greeting"); echo "$out"
    [ "$out" = "$(printf "OK\nVALUE hello big world\nOK\nNOTFOUND")" ]'

  # --- reload: the limits apply to the next request; a bad file fails the reload ---
  local main_pid; main_pid=$(show MainPID)
  write_config '{ "maxValueBytes": 10 }'
  check "a good reload (maxValueBytes 10) exits 0 and the next SET of 20 bytes is refused, one of 10 stored" bash -c '
    in_sandbox systemctl reload kv || exit 1
    out=$(send "SET long 01234567890123456789" "SET short 0123456789"); echo "$out"
    [ "$out" = "$(printf "ERR the value is 20 bytes, more than maxValueBytes (10)\nOK")" ]'
  write_config '{ "maxValueBytes": 0 }'
  check "a bad reload exits 1 and names the key; the same process goes on with the old limit" bash -c "
    in_sandbox systemctl reload kv; rc=\$?; echo \"exit \$rc\"; [ \$rc = 1 ] || exit 1
    out=\$(nsenter -t $pid -a systemctl status --no-pager -n 20 kv); echo \"\$out\" | tail -3
    echo \"\$out\" | grep -q 'maxValueBytes: must be 1 to 1048576 bytes (found 0)' || exit 1
    [ \"\$(send 'SET long 01234567890123456789')\" = 'ERR the value is 20 bytes, more than maxValueBytes (10)' ] &&
    [ \"\$(show MainPID)\" = $main_pid ]"
  local directory=/tmp/hold-$v holder
  in_sandbox mkdir -p "$directory"
  write_config '{ "maxConnections": 1 }'
  in_sandbox systemctl reload kv
  in_sandbox python3 /tmp/client.py hold "$directory" &
  holder=$!
  wait_until 10 test -e "$root$directory/held"
  check "after a reload to maxConnections 1, a second connection is refused with ERR busy" bash -c '
    out=$(send "GET k"); echo "$out"; [ "$out" = "ERR busy: 1 connections are open (maxConnections); try again later" ]'
  touch "$root$directory/release"
  wait "$holder"
  # An idle connection no longer holds its place for good: idleTimeout (reloadable) closes it.
  write_config '{ "maxConnections": 1, "idleTimeout": 2 }'
  in_sandbox systemctl reload kv
  check "after a reload to idleTimeout 2, an idle connection is closed after 2 s with ERR idle, and the one place is free again" bash -c '
    out=$(in_sandbox python3 /tmp/client.py idle); echo "$out"
    [ "$(echo "$out" | head -1)" = "ERR idle: no request within 2 s (idleTimeout); closing" ] || exit 1
    echo "$out" | tail -1 | awk '"'"'{ exit !($3 >= 1.9 && $3 <= 4.5) }'"'"' || exit 1
    out=$(send "GET idle-check"); echo "$out"; [ "$out" = NOTFOUND ]'
  write_config '{}'
  in_sandbox systemctl reload kv

  # --- the journal carries each request's fields ---
  check "the journal has a request entry with KV_COMMAND, KV_KEY, KV_RESULT, KV_PEER, KV_DURATION_US" bash -c "
    nsenter -t $pid -a journalctl -u kv -o json --no-pager | python3 -c '
import json, sys
for e in map(json.loads, sys.stdin):
    if e.get(\"KV_COMMAND\") == \"SET\" and e.get(\"KV_KEY\") == \"greeting\" and e.get(\"KV_RESULT\") == \"OK\" and e.get(\"KV_PEER\", \"\").startswith(\"pid \") and \"KV_DURATION_US\" in e:
        print(e[\"MESSAGE\"]); sys.exit(0)
sys.exit(1)'"

  # --- kill -9 after acknowledged writes loses none of them ---
  check "20 acknowledged SETs, then kill -9: after the restart every value is there" bash -c '
    sets=(); gets=(); expected=()
    for i in $(seq 1 20); do sets+=("SET durable-$i value-$i"); gets+=("GET durable-$i"); expected+=("VALUE value-$i"); done
    [ "$(send "${sets[@]}" | grep -cx OK)" = 20 ] || { echo "not every SET was acknowledged"; exit 1; }
    old=$(show MainPID)
    in_sandbox systemctl kill -s KILL kv
    wait_until 20 bash -c "[ \"\$(show ActiveState)\" = active ] && [ \"\$(show MainPID)\" != $old ] && [ \"\$(show MainPID)\" != 0 ]" || exit 1
    out=$(send "${gets[@]}"); [ "$out" = "$(printf "%s\n" "${expected[@]}")" ] || { echo "$out"; exit 1; }'

  # --- drain: a request in flight completes across systemctl stop ---
  directory=/tmp/slow-$v
  in_sandbox mkdir -p "$directory"
  in_sandbox python3 /tmp/client.py slow "$directory" inflight done > "$work/slow.$v" 2>&1 &
  local slow=$! stop_rc slow_rc stopper
  wait_until 10 test -e "$root$directory/half-sent"
  in_sandbox systemctl stop kv &
  stopper=$!
  wait_until 10 bash -c '[ "$(show ActiveState)" = deactivating ]'
  touch "$root$directory/go"
  wait "$stopper"; stop_rc=$?
  wait "$slow"; slow_rc=$?
  check "systemctl stop lets the half-sent SET finish: OK, stop exit 0, Result=success" bash -c "
    echo \"stop: exit $stop_rc; slow client: exit $slow_rc, answer: \$(cat $work/slow.$v)\"
    [ $stop_rc = 0 ] && [ $slow_rc = 0 ] && [ \"\$(cat $work/slow.$v)\" = OK ] && [ \"\$(show Result)\" = success ]"
  check "the drained SET was committed (the socket starts kv again on the next connection)" bash -c '
    [ "$(send "GET inflight")" = "VALUE done" ]'

  # --- the deadline: a request that never completes is cut at the deadline handed over at stop ---
  directory=/tmp/stuck-$v
  in_sandbox mkdir -p "$directory"
  # Bounded (the stop takes at most 10 s): a client left behind would keep the sandbox alive.
  in_sandbox timeout 30 python3 /tmp/client.py slow "$directory" stuck never > /dev/null 2>&1 &
  local stuck=$! began ended
  wait_until 10 test -e "$root$directory/half-sent"
  began=$SECONDS
  in_sandbox systemctl stop kv; stop_rc=$?
  ended=$SECONDS
  kill "$stuck" 2>/dev/null; wait "$stuck" 2>/dev/null
  check "a request never completed is cut at the stop deadline (default budget 10 s: about 8.6 s), Result=success" bash -c "
    echo \"stop: exit $stop_rc after \$(( $ended - $began )) s\"
    [ $stop_rc = 0 ] && [ \"\$(show Result)\" = success ] && [ \$(( $ended - $began )) -ge 7 ] && [ \$(( $ended - $began )) -le 10 ] &&
    nsenter -t $pid -a journalctl -u kv --no-pager -o cat | grep -q 'the daemon is stopping and the deadline it gave this connection passed'"

  # --- the optional TCP port: bound at start, so changing it is a reload the daemon refuses ---
  # The port takes an access token, the credential kv-token, which the printed unit declares
  # (LoadCredential=kv-token: systemd's credential stores): missing, the start fails naming it;
  # put in /etc/credstore/kv-token, a wrong token is refused and the right one works.
  write_config '{ "tcpPort": 7070 }'
  before=$(cursor)
  check "with tcpPort 7070 and no credential kv-token, the start fails and names LoadCredential=" bash -c "
    in_sandbox systemctl restart kv; rc=\$?; echo \"restart: exit \$rc\"; [ \$rc != 0 ] || exit 1
    await_entry 10 '$before' \"'credential \\'kv-token\\' is missing' in e.get('MESSAGE', '') and 'LoadCredential=kv-token:' in e.get('MESSAGE', '')\""
  in_sandbox systemctl stop kv.service
  in_sandbox systemctl reset-failed kv.service
  mkdir -p "$root/etc/credstore"
  install -m 0600 /dev/null "$root/etc/credstore/kv-token"
  printf 'right-token\n' > "$root/etc/credstore/kv-token"
  in_sandbox systemctl restart kv
  check "the printed LoadCredential=kv-token reads /etc/credstore/kv-token: no AUTH line and a wrong token are refused (ERR unauthorized, KV_RESULT=unauthorized)" bash -c "
    a=\$(in_sandbox env KV_TCP_PORT=7070 python3 /tmp/client.py send 'GET over-tcp'); echo \"\$a\"
    b=\$(in_sandbox env KV_TCP_PORT=7070 python3 /tmp/client.py send 'AUTH wrong-token'); echo \"\$b\"
    refused=\"ERR unauthorized: the first line must be AUTH and kv's access token\"
    [ \"\$a\" = \"\$refused\" ] && [ \"\$b\" = \"\$refused\" ] &&
    nsenter -t $pid -a journalctl -u kv --no-pager -o json | grep -q '\"KV_RESULT\":\"unauthorized\"'"
  check "with the right token, SET and GET over TCP on 127.0.0.1 (the peer named by address)" bash -c "
    out=\$(in_sandbox env KV_TCP_PORT=7070 python3 /tmp/client.py send 'AUTH right-token' 'SET over-tcp yes' 'GET over-tcp'); echo \"\$out\"
    [ \"\$out\" = \"\$(printf 'OK\nOK\nVALUE yes')\" ] &&
    nsenter -t $pid -a journalctl -u kv --no-pager -o json | grep -q '\"KV_PEER\":\"127.0.0.1:'"
  write_config '{ "tcpPort": 7071 }'
  check "a reload that changes tcpPort exits 1 and says it takes a restart" bash -c "
    in_sandbox systemctl reload kv; rc=\$?; echo \"exit \$rc\"; [ \$rc = 1 ] || exit 1
    nsenter -t $pid -a systemctl status --no-pager -n 20 kv | grep -qF 'tcpPort: changing it (7070 → 7071) takes a restart'"
  write_config '{}'

  # --- memory pressure: a write to the FIFO MEMORY_PRESSURE_WATCH names drops the read cache ---
  # (a FIFO through Environment=: this host's cgroup2 has no memory controller to hand over)
  local fifo=/run/kv-pressure.fifo pressure_fd before
  mkfifo -m 0666 "$root$fifo"
  mkdir -p "$root/etc/systemd/system/kv.service.d"
  # MEMORY_PRESSURE_WRITE= empty: from 254 on systemd sets the PSI trigger, which the daemon would
  # write into the FIFO itself, a report at start (and the test's, within the second, rate-limited).
  printf '[Service]\nEnvironment=MEMORY_PRESSURE_WATCH=%s MEMORY_PRESSURE_WRITE=\n' "$fifo" > "$root/etc/systemd/system/kv.service.d/pressure.conf"
  in_sandbox systemctl daemon-reload
  # stop (which empties the descriptor store: no cache snapshot comes back), then start
  in_sandbox systemctl stop kv.service
  in_sandbox systemctl start kv
  check "after 3 SETs, a GET is a cache hit (STATS hits 1 misses 0 entries 3)" bash -c '
    out=$(send "SET warm-1 one" "SET warm-2 two" "SET warm-3 three" "GET warm-2" "STATS"); echo "$out"
    [ "$(echo "$out" | tail -1)" = "STATS hits 1 misses 0 entries 3" ]'
  before=$(cursor)
  exec {pressure_fd}<>"$root$fifo"
  printf x >&$pressure_fd
  check "a write to the FIFO drops the read cache: the journal says so with KV_CACHE_DROPPED=3" bash -c "
    await_entry 10 '$before' \"e.get('KV_CACHE_DROPPED') == '3' and e.get('PRIORITY') == '5'\" && exit
    nsenter -t $pid -a journalctl -u kv --no-pager -o cat | grep -i 'memory pressure'; exit 1"
  exec {pressure_fd}>&-
  check "after the drop, the next GET is a miss that reads SQLite (STATS hits 1 misses 1 entries 1)" bash -c '
    out=$(send "GET warm-2" "STATS"); echo "$out"
    [ "$out" = "$(printf "VALUE two\nSTATS hits 1 misses 1 entries 1")" ]'
  rm -f "$root/etc/systemd/system/kv.service.d/pressure.conf" "$root$fifo"
  in_sandbox systemctl daemon-reload

  # --- a warm cache across systemctl restart: a snapshot in systemd's file-descriptor store ---
  # Cold misses: of 20 GETs of keys SET (so cached) before the restart, how many miss after it.
  local snapshot_sets=() snapshot_gets=() with without
  for i in $(seq 1 20); do snapshot_sets+=("SET snap-$i value-$i"); snapshot_gets+=("GET snap-$i"); done
  send "${snapshot_sets[@]}" > /dev/null
  before=$(cursor)
  in_sandbox systemctl restart kv
  with=$(send "${snapshot_gets[@]}" STATS | tail -1)
  echo "# cold misses after systemctl restart with the store (FileDescriptorStoreMax=1): $with"
  check "with the store: 0 cold misses of 20 GETs after systemctl restart ($with)" \
    bash -c "[[ '$with' == 'STATS hits 20 misses 0 '* ]]"
  check "the journal says the cache was restored from the store (KV_CACHE_RESTORED ≥ 20)" await_entry 10 "$before" \
    "int(e.get('KV_CACHE_RESTORED', '0')) >= 20"
  printf '[Service]\nFileDescriptorStoreMax=0\n' > "$root/etc/systemd/system/kv.service.d/no-store.conf"
  in_sandbox systemctl daemon-reload
  in_sandbox systemctl stop kv.service   # empties the store
  in_sandbox systemctl start kv
  send "${snapshot_sets[@]}" > /dev/null
  in_sandbox systemctl restart kv
  without=$(send "${snapshot_gets[@]}" STATS | tail -1)
  echo "# cold misses after systemctl restart without the store (FileDescriptorStoreMax=0): $without"
  check "without the store (FileDescriptorStoreMax=0): 20 cold misses of 20 GETs after the same restart ($without)" \
    bash -c "[[ '$without' == 'STATS hits 0 misses 20 '* ]]"
  rm -f "$root/etc/systemd/system/kv.service.d/no-store.conf"
  in_sandbox systemctl daemon-reload
  in_sandbox systemctl stop kv.service   # empties the store: no snapshot from this part later
  # This part starts kv more often than the start limit allows (5 in 10 s): reset its count, or
  # the next connection's activation is refused (start-limit-hit, and kv.socket fails with it).
  in_sandbox systemctl reset-failed kv.service

  # --- restart: systemd holds the socket, nothing is refused ---
  local loop
  directory=/tmp/loop-$v
  in_sandbox mkdir -p "$directory"
  in_sandbox python3 /tmp/client.py loop "$directory" > "$work/loop.$v" 2> "$work/loop-errors.$v" &
  loop=$!
  wait_until 10 test -e "$root$directory/answering" && in_sandbox systemctl restart kv.service
  touch "$root$directory/restarted"
  wait "$loop"
  counts=$(cat "$work/loop.$v")
  check "0 connections refused across systemctl restart (answered refused failed: $counts)" bash -c "
    sort $work/loop-errors.$v | uniq -c | head -5
    nsenter -t $pid -a systemctl status --no-pager -n 0 kv.socket kv.service | grep -E 'Active|Loaded|●' >&2
    read -r answered refused failed <<< '$counts'; [ \"\$refused\" = 0 ] && [ \"\$failed\" = 0 ] && [ \"\$answered\" -gt 5 ]"
  in_sandbox systemctl stop kv.socket kv.service
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
