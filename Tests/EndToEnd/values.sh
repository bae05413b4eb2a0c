# Values, ranges and file safety (issue 10, items 1, 3, 4, 6, 9) under systemd 252 with the
# shipped unit. Sourced by run.sh while vigild is stopped; leaves it stopped, with the
# configuration it found.
echo "# values, ranges and file safety"
config=/etc/vigild/vigild.json
state=$root/var/lib/private/vigild
good='{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0.2 } }'
range='persistence.checkpointInterval: must be 0 (checkpoints only on SIGUSR1 and at stop) or a number of seconds from 0.1 to 86400 (found 1e+19)'

# rejected_reload NAME TEXT: systemctl reload fails, the daemon keeps its MainPID, and the journal
# has a rejected-reload entry whose VIGIL_REASON contains TEXT.
rejected_reload() {
  local name=$1 text=$2 before
  before=$(cursor)
  check "$name: systemctl reload exits non-zero" bash -c "! nsenter -t $pid -a systemctl reload vigild"
  check "$name: still active with the same MainPID" bash -c "
    [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
    [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $main_pid ]"
  check "$name: the journal says why" await_entry 10 "$before" \
    "e.get('MESSAGE_ID') == '9475ebda59634e2fb407cda3695425bc' and $(python3 -c 'import sys; print(repr(sys.argv[1]))' "$text") in e.get('VIGIL_REASON', '')"
  check "$name: heartbeats go on" await_entry 10 "$before" "e.get('MESSAGE') == 'alive'"
}

# --- item 1: a huge checkpointInterval ---
write_config '{"persistence":{"checkpointInterval":9999999999999999999}}'
check "check-config refuses a huge checkpointInterval with key and range" bash -c "
  out=\$(nsenter -t $pid -a vigild check-config $config 2>&1); status=\$?; echo \"\$out\"
  [ \$status -ne 0 ] && echo \"\$out\" | grep -qF '$range'"
write_config "$good"
check "values: start" in_sandbox systemctl start vigild
main_pid=$(show MainPID)
write_config '{"persistence":{"checkpointInterval":9999999999999999999}}'
rejected_reload "huge checkpointInterval" "$range"

# --- item 6: a FIFO as the configuration ---
rm -f "$root$config"
mkfifo -m 0644 "$root$config"
started=$EPOCHREALTIME
check "FIFO as the configuration: systemctl reload fails" bash -c "! timeout 20 nsenter -t $pid -a systemctl reload vigild"
elapsed=$(awk "BEGIN { print $EPOCHREALTIME - $started }")
check "FIFO as the configuration: the reload failed promptly (${elapsed}s, well under 5 s)" \
  awk "BEGIN { exit !($elapsed < 2.5) }"
rejected_reload "FIFO as the configuration" "cannot read the file: it is a FIFO (named pipe), not a regular file"
check "FIFO as the configuration: check-config refuses it promptly" bash -c "
  out=\$(timeout 5 nsenter -t $pid -a vigild check-config $config 2>&1); status=\$?; echo \"\$out\"
  [ \$status -eq 1 ] && echo \"\$out\" | grep -q 'it is a FIFO (named pipe), not a regular file'"
rm -f "$root$config"

# --- item 9: unreadable configured files are rejections, never the defaults ---
ln -s /etc/vigild/nowhere.json "$root$config"
rejected_reload "dangling symlink as the configuration" "cannot read the file: it is a symbolic link whose target does not exist"
rm -f "$root$config"
ln -s vigild.json "$root$config"
rejected_reload "symlink loop as the configuration" "cannot read the file: Too many levels of symbolic links"
rm -f "$root$config"
write_config "$good"
chmod 0700 "$root/etc/vigild"
rejected_reload "/etc/vigild at mode 0700" "cannot read the file: Permission denied"
chmod 0755 "$root/etc/vigild"
rm -f "$root$config"
rejected_reload "the file in force deleted" "no longer exists; the running configuration stays in force; write {} to run on the defaults"
check "the file in force deleted: still generation 1" bash -c "
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"generation\"] == 1 else 1)'"
write_config "$good"

# --- item 3: state files that parse but do not validate ---
for count in 9223372036854775807 '"many"'; do
  in_sandbox systemctl stop vigild
  rm -f "$state"/state.json.corrupt-*
  printf '{"formatVersion": 1, "heartbeat": {"count": %s}}\n' "$count" > "$state/state.json"
  cp "$state/state.json" "$work/state-original.json"
  before=$(cursor)
  check "state count $count: the daemon starts" bash -c "timeout 20 nsenter -t $pid -a systemctl start vigild"
  check "state count $count: the file is moved aside with the original bytes" cmp "$work/state-original.json" "$state/state.json.corrupt-1"
  check "state count $count: the journal has the readable reason" await_entry 10 "$before" \
    "'heartbeat.count: expected a whole number' in e.get('MESSAGE', '') and 'moved the file to /var/lib/vigild/state.json.corrupt-1' in e.get('MESSAGE', '') and 'Failure(' not in e.get('MESSAGE', '')"
  check "state count $count: heartbeats count from 1" await_entry 10 "$before" \
    "e.get('MESSAGE') == 'alive' and e.get('VIGIL_HEARTBEAT') == '1'"
done

# --- item 6: a FIFO as the state file ---
in_sandbox systemctl stop vigild
rm -f "$state"/state.json "$state"/state.json.corrupt-*
mkfifo -m 0644 "$state/state.json"
before=$(cursor)
check "FIFO as state.json: start does not hang" bash -c "timeout 20 nsenter -t $pid -a systemctl start vigild"
check "FIFO as state.json: moved aside, with the reason in the journal" bash -c "
  [ -p $state/state.json.corrupt-1 ] &&
  await_entry 10 '$before' \"'it is a FIFO (named pipe), not a regular file' in e.get('MESSAGE', '')\""
check "FIFO as state.json: stop is clean" bash -c "
  timeout 20 nsenter -t $pid -a systemctl stop vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ]"
rm -f "$state"/state.json.corrupt-*
write_config "$good"
