# One vigild per directory (issue 21 item 3) and a runtime directory that systemd preserves as a
# link for a DynamicUser= (item 14), under systemd with the shipped unit. Sourced by run.sh while
# vigild is stopped; leaves it stopped. Uses run.sh's helpers (check, show, in_sandbox, $pid, $root).
echo "# one instance per directory; RuntimeDirectoryPreserve=yes"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0.2 } }'
in_sandbox systemctl start vigild
main_pid=$(show MainPID)

# instance_refused NAME ARGS...: root's `vigild run ARGS` beside the service exits non-zero at
# once, naming the service's MainPID, and the service's status.json still describes it.
instance_refused() {
  local out rc
  shift
  # Without the unit's variables, root's defaults are the unit's directories (/var/lib/vigild,
  # /run/vigild). timeout: a second daemon that started would otherwise run on.
  out=$(in_sandbox env -u STATE_DIRECTORY -u RUNTIME_DIRECTORY -u XDG_STATE_HOME -u NOTIFY_SOCKET \
    timeout 20 vigild run "$@" 2>&1); rc=$?
  echo "exit $rc: $out"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || return 1
  echo "$out" | grep -q "pid $main_pid holds it: another daemon runs on" || return 1
  [ "$(in_sandbox vigild status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')" = "$main_pid" ] ||
    { echo "status.json no longer describes the service"; return 1; }
}
check "instance: a hand-run vigild on the unit's directories exits non-zero naming MainPID" instance_refused default
check "instance: one on the unit's state directory alone is refused too" \
  instance_refused state --state-directory /var/lib/vigild --runtime-directory /tmp/other-run
check "instance: systemctl reload still works after" in_sandbox systemctl reload vigild
check "instance: vigild status still works after, same MainPID" bash -c "
  nsenter -t $pid -a vigild status | grep -q '^vigild pid $main_pid: running' &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $main_pid ]"
check "instance: the service stops cleanly" bash -c "
  nsenter -t $pid -a systemctl stop vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ]"

# --- item 14: DynamicUser=yes + RuntimeDirectoryPreserve=yes makes /run/vigild a link ---
mkdir -p "$root/etc/systemd/system/vigild.service.d"
printf '[Service]\nRuntimeDirectoryPreserve=yes\n' > "$root/etc/systemd/system/vigild.service.d/preserve.conf"
in_sandbox systemctl daemon-reload
check "RuntimeDirectoryPreserve=yes: starts, with /run/vigild a link to private/vigild" bash -c "
  nsenter -t $pid -a systemctl start vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  [ \"\$(readlink $root/run/vigild)\" = private/vigild ]"
check "RuntimeDirectoryPreserve=yes: systemctl reload and vigild status work through the link" bash -c "
  nsenter -t $pid -a systemctl reload vigild &&
  nsenter -t $pid -a vigild status | grep -q \"^vigild pid \$(nsenter -t $pid -a systemctl show -P MainPID vigild): running\""
check "RuntimeDirectoryPreserve=yes: stop, then a start on the preserved directory" bash -c "
  nsenter -t $pid -a systemctl stop vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ] &&
  nsenter -t $pid -a systemctl start vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ]"
in_sandbox systemctl stop vigild
rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload
in_sandbox systemctl clean --what=runtime vigild

# --- item 13: a state file system that is full at start ---
in_sandbox mkdir -p /var/lib/private/vigild
in_sandbox mount -t tmpfs -o size=64k,mode=0700 vigil-e2e-full /var/lib/private/vigild
dd if=/dev/zero of="$root/var/lib/private/vigild/fill" bs=4k 2>/dev/null
before=$(cursor)
check "full state file system at start: systemctl start fails" bash -c "! nsenter -t $pid -a systemctl start vigild"
check "full state file system at start: the start-failed entry says where and ENOSPC" await_entry 10 "$before" \
  "e.get('MESSAGE_ID') == 'fb2c9dd93cf0458ea1c91bbc63140915' and 'state.json.running.tmp' in e.get('MESSAGE', '') and 'No space left on device' in e.get('MESSAGE', '')"
in_sandbox systemctl stop vigild
rm -f "$root/var/lib/private/vigild/fill"
in_sandbox umount /var/lib/private/vigild
in_sandbox systemctl reset-failed vigild 2>/dev/null || true
