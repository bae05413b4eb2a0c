# Sourced by run.sh: descriptor limits and a flood of real-time signals nobody owns (issue 21,
# items 1 and 9) with the shipped unit. The unit is stopped when this section begins and ends.
echo "# descriptor limits and unowned real-time signals"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" } }'
limits_dropin=$root/etc/systemd/system/vigild.service.d
mkdir -p "$limits_dropin"

# --- item 1: too few descriptors fail the start with a line, not a SIGILL ---
# Restart=no: one start, one result (the shipped Restart=on-failure would retry the same failure).
# 6: the loop's last descriptor (Dispatch's eventfd); 8: run's own check; the last: one short. With few
# descriptors systemd may fail to set the unit up itself before vigild runs (status=226/NAMESPACE,
# EMFILE: 252 at 5, 254 at 7): such a limit says so and checks nothing of vigild's.
# The minimum (EventLoopExecutor.minimumDescriptorLimit): 14, and one more from systemd 254 on,
# where systemd hands every unit a memory-pressure watch ($MEMORY_PRESSURE_WATCH) by default.
minimum=14
[ "${VIGIL_E2E_SYSTEMD:-252}" -ge 254 ] && minimum=15
for limit in 6 8 $((minimum - 1)); do
  printf '[Service]\nLimitNOFILE=%s\nRestart=no\n' "$limit" > "$limits_dropin/limits.conf"
  in_sandbox systemctl daemon-reload
  before=$(cursor)
  check "LimitNOFILE=$limit: systemctl start fails" bash -c "! nsenter -t $pid -a systemctl start vigild"
  spawn_status=$(show ExecMainStatus)
  # systemd's own EXIT_* codes are 200 and up (systemd.exec(5)); vigild exits 0, 1, 2 or 64.
  if [ "${spawn_status:-0}" -ge 200 ]; then
    echo "skip - LimitNOFILE=$limit: systemd itself cannot spawn the unit (status=$spawn_status); vigild never ran"
  else
    check "LimitNOFILE=$limit: vigild exited 1, not killed by a signal (no SIGILL, no core)" bash -c "
      [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainCode vigild)\" = 1 ] &&
      [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainStatus vigild)\" = 1 ] &&
      [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = exit-code ]"
    check "LimitNOFILE=$limit: the journal names EMFILE and LimitNOFILE=" await_entry 10 "$before" \
      "'EMFILE' in e.get('MESSAGE', '') and 'LimitNOFILE=' in e.get('MESSAGE', '')"
  fi
  in_sandbox systemctl reset-failed vigild
done

# The minimum (the README's failure-mode table).
printf '[Service]\nLimitNOFILE=%s\n' "$minimum" > "$limits_dropin/limits.conf"
in_sandbox systemctl daemon-reload
before=$(cursor)
check "LimitNOFILE=$minimum: starts" in_sandbox systemctl start vigild
check "LimitNOFILE=$minimum: reloads" in_sandbox systemctl reload vigild
check "LimitNOFILE=$minimum: no descriptor was missing" bash -c "
  ! nsenter -t $pid -a journalctl -u vigild --no-pager --after-cursor='$before' | grep -F 'Too many open files'"
in_sandbox systemctl stop vigild
check "LimitNOFILE=$minimum: stops cleanly (Result=success, exit 0)" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainStatus vigild)\" = 0 ]"
rm -f "$limits_dropin/limits.conf"
rmdir "$limits_dropin" 2>/dev/null
in_sandbox systemctl daemon-reload

# --- item 9: unowned real-time signals are taken and discarded, not left queued ---
before=$(cursor)
check "unowned real-time signals: vigild starts" start_unit vigild
main_pid=$(show MainPID)
# MainPID is 0 when the start failed, and `kill -s SIGRTMIN+5 0` would signal this script's
# process group, `swift test` included (it killed CI so once): no pid, no flood.
check "unowned real-time signals: MainPID ($main_pid) names one process" one_pid "$main_pid"
one_pid "$main_pid" || main_pid=no-such-process
# 100,000 SIGRTMIN+5 (bash's kill builtin: about a second); a send the queue refuses (EAGAIN) fails.
refused=$(in_sandbox bash -c "n=0; for _ in \$(seq 100000); do kill -s SIGRTMIN+5 $main_pid 2>/dev/null || n=\$((n + 1)); done; echo \$n")
check "100,000 SIGRTMIN+5: the daemon's queue took them ($refused refused)" test "$refused" -lt 50000
# SigQ: signals queued for the daemon's user; ShdPnd: the daemon's pending set (bit 38 = signal 39,
# SIGRTMIN+5).
sig_queue() { in_sandbox sed -n 's/^SigQ:\t\([0-9]*\)\/.*/\1/p' "/proc/$main_pid/status"; }
rt_pending() {
  in_sandbox python3 -c "
import sys
mask = int([l.split()[1] for l in open('/proc/$main_pid/status') if l.startswith('ShdPnd:')][0], 16)
sys.exit(0 if mask & (1 << 38) else 1)"
}
export main_pid
export -f rt_pending
check "100,000 SIGRTMIN+5: none stays pending" wait_until 20 bash -c '! rt_pending'
queued=$(sig_queue)
check "100,000 SIGRTMIN+5: SigQ near zero ($queued)" test "${queued:-99999}" -lt 100
check "100,000 SIGRTMIN+5: one journal line says they were discarded" bash -c "
  [ \"\$(nsenter -t $pid -a journalctl -u vigild --no-pager --after-cursor='$before' | grep -c 'Discarded SIGRTMIN+5')\" = 1 ]"
check "100,000 SIGRTMIN+5: the daemon still reloads" in_sandbox systemctl reload vigild
check "100,000 SIGRTMIN+5: same MainPID" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $main_pid ]"
before=$(cursor)
check "100,000 SIGRTMIN+5: heartbeats go on" await_entry 10 "$before" "e.get('MESSAGE') == 'alive'"
in_sandbox systemctl stop vigild
check "100,000 SIGRTMIN+5: stops cleanly (Result=success)" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ]"
