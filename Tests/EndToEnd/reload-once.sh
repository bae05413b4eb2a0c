# One reload per request, a rejected one fails (issue 24: once 254-only, now on every version);
# sourced by run.sh with vigild installed and stopped. Type=notify-reload was tried and dropped
# (systemd/README.md): with ExecReload= emptied a rejected configuration gives "Reloaded" (exit
# 0); with ExecReload= kept every request reloads twice. Uses run.sh's helpers (check,
# await_entry, cursor, journal, show, write_config, in_sandbox). Leaves vigild stopped.
echo "# one reload per request"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" } }'
check "reload once: start returns after readiness" bash -c "
  nsenter -t $pid -a systemctl start vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P StatusText vigild)\" = 'Running (generation 1)' ]"
main_pid=$(show MainPID)
# reloads_since CURSOR: the reload outcomes logged since CURSOR, in order (applied/rejected).
reloads_since() {
  journal --after-cursor="$1" | python3 -c '
import json, sys
ids = {"7dd32b12fecb4f54b882f1a4b4061f72": "applied", "9475ebda59634e2fb407cda3695425bc": "rejected"}
print(" ".join(ids[e["MESSAGE_ID"]] for e in map(json.loads, sys.stdin) if e.get("MESSAGE_ID") in ids))'
}
# One request, then a SIGUSR1 whose checkpoint entry marks the end: a second reload, had the
# request caused one, would be logged before it (one event at a time).
one_request() { # one_request EXPECTED_EXIT EXPECTED_OUTCOME
  local before rc
  before=$(cursor)
  in_sandbox systemctl reload vigild; rc=$?
  in_sandbox systemctl kill --kill-who=main -s USR1 vigild
  await_entry 10 "$before" "e.get('VIGIL_EVENT') == 'checkpoint'" >/dev/null || { echo "no checkpoint"; return 1; }
  local seen; seen=$(reloads_since "$before")
  echo "exit $rc, reloads: [$seen]"
  if [ "$1" = 0 ]; then [ "$rc" = 0 ]; else [ "$rc" != 0 ]; fi && [ "$seen" = "$2" ]
}
export -f one_request reloads_since journal cursor
write_config '{ "heartbeat": { "interval": 0.3, "message": "changed" } }'
check "reload once: a good reload exits 0, exactly one reload" one_request 0 applied
check "reload once: vigild status right after shows generation 2" bash -c "
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"generation\"] == 2 and d[\"heartbeat\"][\"message\"] == \"changed\" else 1)'"
write_config '{ "heartbeat": { "interval": -1 } }'
check "reload once: a bad reload exits non-zero, exactly one reload" one_request 1 rejected
# StatusText keeps the rejection in front of the SIGUSR1 report that followed it (the heartbeat
# worker sends it after the checkpoint entry one_request waits for), until the next reload.
check "reload once: StatusText keeps the rejection in front of the SIGUSR1 report" wait_until 5 bash -c "
  s=\$(nsenter -t $pid -a systemctl show -P StatusText vigild)
  [[ \$s == 'Running (generation 2); reload rejected: '*heartbeat.interval*'; '*' heartbeats' ]]"
# vigild status keeps the last reload's outcome.
check "reload once: after the bad reload still active on generation 2, the rejection recorded" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $main_pid ] &&
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); r=d[\"lastReload\"]; sys.exit(0 if d[\"generation\"] == 2 and r[\"result\"] == \"rejected\" and \"heartbeat.interval\" in r.get(\"reason\", \"\") else 1)'"
write_config '{ "heartbeat": { "interval": 0.3, "message": "again" } }'
check "reload once: the next good reload exits 0, exactly one reload, generation 3" bash -c "
  one_request 0 applied &&
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"generation\"] == 3 else 1)'"
check "reload once: the good reload cleared the rejection from StatusText" wait_until 5 bash -c "
  s=\$(nsenter -t $pid -a systemctl show -P StatusText vigild)
  [[ \$s == 'Running (generation 3); '*' heartbeats' && \$s != *rejected* ]]"
check "reload once: stop exits cleanly" bash -c "
  nsenter -t $pid -a systemctl stop vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ]"
