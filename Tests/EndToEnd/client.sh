# vigild's clients under systemd 252 (issue 10, items 11, 14–16); sourced by run.sh after the
# watchdog section, with vigild installed and stopped. Uses run.sh's helpers (check, await_entry,
# cursor, show, wait_until, write_config, in_sandbox).
echo "# clients: the pid proof, forged reasons, stop during a slow reload"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
in_sandbox systemctl start vigild

# ExecReload= runs in a user namespace of its own where ProtectProc=invisible hides
# /proc/$MAINPID: the pid proof falls back to systemd's $MAINPID there.
check "clients: systemctl reload passes the pid proof under ProtectProc=invisible" in_sandbox systemctl reload vigild
# Root without $RUNTIME_DIRECTORY (sudo vigild reload) uses /run/vigild, owned by the DynamicUser
# under a root-owned /run, and proves the pid by its start time.
check "clients: root's vigild reload and status use /run/vigild by default" \
  in_sandbox env -u RUNTIME_DIRECTORY -u XDG_RUNTIME_DIR sh -c 'vigild reload && vigild status | grep -q "generation 3"'

# --- item 15: vigild reload --pid N signals only the daemon ---
pid1_reloads() { in_sandbox journalctl _PID=1 -o cat --no-pager | grep -cE '^Reloading(\.|\.\.\.)$'; }
client_pid_one_is_refused() {
  local before status
  before=$(pid1_reloads)
  for bad in 1 0 -1; do
    in_sandbox vigild reload --pid="$bad"; status=$?
    [ "$status" -eq 2 ] || { echo "--pid=$bad: exit $status, expected 2"; return 1; }
  done
  # The control: a daemon-reload of our own shows up as exactly one more "Reloading." (252;
  # "Reloading..." on 257).
  in_sandbox systemctl daemon-reload
  wait_until 10 bash -c "[ \$(nsenter -t $pid -a journalctl _PID=1 -o cat --no-pager | grep -cE '^Reloading(\.|\.\.\.)\$') -gt $before ]" || return 1
  [ "$(pid1_reloads)" -eq $((before + 1)) ] || { echo "systemd reloaded $(( $(pid1_reloads) - before )) times"; return 1; }
}
check "clients: vigild reload --pid 1/0/-1 exits 2 and systemd does not reload itself" client_pid_one_is_refused
client_other_pid_is_refused() {
  in_sandbox systemd-run --quiet --unit=client-victim sleep 300 || return 1
  local victim status
  victim=$(in_sandbox systemctl show -P MainPID client-victim)
  in_sandbox vigild reload --pid "$victim"; status=$?
  [ "$status" -eq 2 ] || { echo "exit $status, expected 2"; return 1; }
  [ "$(in_sandbox systemctl show -P ActiveState client-victim)" = active ] || { echo "the sleep was signalled"; return 1; }
  in_sandbox systemctl stop client-victim
}
check "clients: vigild reload --pid <a root sleep> exits 2 and the sleep lives" client_other_pid_is_refused

# --- item 16: a forged rejection reason cannot forge a journal entry ---
main_pid=$(show MainPID)
write_config '{"logLevel":"x\n<0>sshd[1]: FORGED"}'
before=$(cursor)
check "forged reason: systemctl reload fails" bash -c "! nsenter -t $pid -a systemctl reload vigild"
check "forged reason: the client's one line reaches the journal with the newline escaped" await_entry 10 "$before" \
  "e.get('_PID') != '$main_pid' and 'reload rejected' in str(e.get('MESSAGE')) and '<0>sshd[1]: FORGED' in str(e.get('MESSAGE'))"
client_no_forged_entry() {
  in_sandbox journalctl -u vigild -o json --no-pager --after-cursor="$before" | python3 -c '
import json, sys
entries = [json.loads(line) for line in sys.stdin]
forged = [e for e in entries if e.get("PRIORITY") in ("0", "1", "2") or str(e.get("MESSAGE", "")).startswith(("sshd", "<0>"))]
print(forged)
sys.exit(1 if forged else 0)'
}
check "forged reason: no entry of priority 0-2 and none starting with the forged text" client_no_forged_entry

# --- item 11: systemctl stop during a slow systemctl reload stays clean ---
mkdir -p "$root/etc/systemd/system/vigild.service.d"
printf '[Service]\nEnvironment=VIGIL_FAILPOINTS=reload-slow\n' > "$root/etc/systemd/system/vigild.service.d/slow.conf"
in_sandbox systemctl daemon-reload
client_stop_during_reload() { # CONFIG: reload to CONFIG (3 s), stop after it began
  write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" } }'
  in_sandbox systemctl restart vigild || return 1
  write_config "$1"
  local before
  before=$(cursor)
  in_sandbox systemctl reload --no-block vigild
  wait_until 10 bash -c "[ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = reloading ]" || return 1
  await_entry 10 "$before" "'reload-slow' in str(e.get('MESSAGE'))" >/dev/null || return 1
  in_sandbox systemctl stop vigild || return 1
  local result status
  result=$(show Result); status=$(show ExecMainStatus)
  echo "Result=$result ExecMainStatus=$status"
  in_sandbox journalctl -u vigild --no-pager --after-cursor="$before" | tail -8
  [ "$result" = success ] && [ "$status" = 0 ] &&
    ! in_sandbox journalctl -u vigild --no-pager --after-cursor="$before" | grep -q 'Failed with result'
}
check "stop during a slow reload that applies: Result=success" client_stop_during_reload \
  '{ "heartbeat": { "interval": 0.3, "message": "slow" } }'
check "stop during a slow reload that is rejected: Result=success" client_stop_during_reload \
  '{ "heartbeat": { "interval": -1 } }'
rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload
in_sandbox systemctl reset-failed vigild 2>/dev/null || true
