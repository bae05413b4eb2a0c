# Sourced by run.sh under systemd 252: a full disk at stop (issue 10 #10). The final checkpoint
# cannot be written, so the stop must not look clean: exit status 1, Result=exit-code, and the
# journal says what was lost. The unit is stopped when this section begins and when it ends.
echo "# a full disk at stop"
state_dir=$root/var/lib/private/vigild
write_config '{ "heartbeat": { "interval": 0.1, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
in_sandbox mkdir -p /var/lib/private/vigild
in_sandbox mount -t tmpfs -o size=256k,mode=0700 vigil-e2e-small "/var/lib/private/vigild"
before=$(cursor)
in_sandbox systemctl start vigild
check "disk full: the daemon runs and beats on a small file system" await_entry 10 "$before" \
  "e.get('MESSAGE') == 'alive' and int(e.get('VIGIL_HEARTBEAT', 0)) >= 3"
# Fill it as root from outside the unit; tmpfs enforces its size for root too.
dd if=/dev/zero of="$state_dir/fill" bs=4k 2>/dev/null
before=$(cursor)
in_sandbox systemctl stop vigild
check "disk full: the stop is not reported as clean (exit 1, Result=exit-code)" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainStatus vigild)\" = 1 ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = exit-code ]"
check "disk full: the journal says the final checkpoint failed and what was lost" await_entry 10 "$before" \
  "e.get('PRIORITY') == '2' and 'final checkpoint to /var/lib/vigild/state.json failed' in e.get('MESSAGE', '') and 'lost: heartbeat = {\"count\":' in e.get('MESSAGE', '')"
check "disk full: StatusText names the failure" bash -c "
  nsenter -t $pid -a systemctl show -P StatusText vigild | grep -q '^Stopped with errors: persistence the final checkpoint'"
rm -f "$state_dir/fill"
in_sandbox umount /var/lib/private/vigild
in_sandbox systemctl reset-failed vigild
