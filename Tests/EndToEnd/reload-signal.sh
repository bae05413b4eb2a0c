# Another reload signal under systemd: a drop-in gives ExecStart= `--reload-signal SIGRTMIN+3`
# and leaves the unit's ExecReload= (`vigild reload --pid $MAINPID`) as shipped. Before,
# `reload` sent SIGHUP, the daemon discarded it, and `systemctl reload` waited out the client's
# 90 s and failed; now status.json names the signal and `reload` sends it. Sourced by run.sh
# with vigild installed and stopped; uses its helpers. Leaves vigild stopped, the drop-in gone.
echo "# another reload signal"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" } }'
mkdir -p "$root/etc/systemd/system/vigild.service.d"
printf '[Service]\nExecStart=\nExecStart=/usr/bin/vigild run --reload-signal SIGRTMIN+3\n' \
  > "$root/etc/systemd/system/vigild.service.d/reload-signal.conf"
in_sandbox systemctl daemon-reload
check "reload signal: starts with --reload-signal SIGRTMIN+3, status.json names it" bash -c "
  nsenter -t $pid -a systemctl start vigild &&
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"reloadSignal\"] == \"SIGRTMIN+3\" else 1)'"
write_config '{ "heartbeat": { "interval": 0.3, "message": "changed" } }'
before=$(cursor)
check "reload signal: systemctl reload exits 0 within 20 s, the new configuration applied" bash -c "
  timeout 20 nsenter -t $pid -a systemctl reload vigild &&
  nsenter -t $pid -a vigild status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"generation\"] == 2 and d[\"heartbeat\"][\"message\"] == \"changed\" else 1)'"
check "reload signal: the reload was SIGRTMIN+3's, no SIGHUP discarded" bash -c "
  await_entry 10 '$before' \"e.get('VIGIL_EVENT') == 'reload-applied'\" &&
  ! nsenter -t $pid -a journalctl -u vigild --no-pager --after-cursor='$before' | grep -q 'Discarded SIGHUP'"
in_sandbox systemctl stop vigild
rm -f "$root/etc/systemd/system/vigild.service.d/reload-signal.conf"
rmdir "$root/etc/systemd/system/vigild.service.d" 2>/dev/null
in_sandbox systemctl daemon-reload
