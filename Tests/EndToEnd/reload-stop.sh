# A stop right behind a reload (issue 21, item 2); sourced by run.sh with vigild installed, once
# under systemd 252 and once under 254. Uses run.sh's helpers (check, show, in_sandbox, cursor,
# write_config) and $root.
#
# `systemctl reload --no-block; sleep 0–60 ms; systemctl stop`: the stop takes the unit from
# SERVICE_RELOAD straight to SERVICE_STOP_SIGTERM and SIGTERMs the ExecReload= process too, often
# before it has exec'd vigild. A control process killed by SIGTERM made the unit `Result=signal`
# (failed) unless SuccessExitStatus= lists SIGTERM (systemd/README.md, "A stop during a reload").
# First the unit without that line must fail at least once (so the loop can see a failure), then
# the shipped unit must end every run `Result=success`.
reload_stop_version=$(in_sandbox systemctl --version | head -1 | cut -d' ' -f2)
echo "# reload-stop: systemctl stop 0-60 ms behind systemctl reload --no-block (systemd $reload_stop_version)"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
in_sandbox systemctl stop vigild 2>/dev/null
in_sandbox systemctl reset-failed vigild 2>/dev/null

# reload_stop_runs RUNS MODE: RUNS times start, reload --no-block, sleep, stop, the sleep going
# 0, 2, 4, … 58, 0 … ms. MODE `all` passes when every run ends Result=success, inactive, the
# daemon's exit status 0; MODE `until-failure` stops at the first failed run and passes if it
# ended Result=signal.
reload_stop_runs() {
  local runs=$1 mode=$2 i ms result state status failures=0 before
  for i in $(seq 1 "$runs"); do
    ms=$(( (i - 1) * 2 % 60 ))
    # Also empties the start rate limit (StartLimitBurst=5 in 10 s), which these starts exceed.
    in_sandbox systemctl reset-failed vigild 2>/dev/null
    in_sandbox systemctl start vigild || { echo "run $i: systemctl start failed"; return 1; }
    before=$(cursor)
    in_sandbox systemctl reload --no-block vigild
    sleep "$(printf '0.%03d' "$ms")"
    in_sandbox systemctl stop vigild
    result=$(show Result); state=$(show ActiveState); status=$(show ExecMainStatus)
    if [ "$result" != success ] || [ "$state" != inactive ] || [ "$status" != 0 ]; then
      failures=$((failures + 1))
      echo "run $i ($ms ms): Result=$result ActiveState=$state ExecMainStatus=$status"
      in_sandbox journalctl -u vigild --no-pager -o cat --after-cursor="$before" | grep -E 'Control process|Failed with result' | head -2
      [ "$mode" = until-failure ] && break
    fi
  done
  echo "$failures of $i runs failed"
  if [ "$mode" = until-failure ]; then [ "$result" = signal ]; else [ "$failures" -eq 0 ]; fi
}

mkdir -p "$root/etc/systemd/system/vigild.service.d"
# An empty SuccessExitStatus= resets the list: the unit as it was before the fix.
printf '[Service]\nSuccessExitStatus=\n' > "$root/etc/systemd/system/vigild.service.d/old-unit.conf"
in_sandbox systemctl daemon-reload
# Usually the first few runs fail; once in CI, with a build loading both CPUs beside the suite,
# none of 30 did (the window is the few milliseconds before the reload's process execs): 60.
check "reload-stop ($reload_stop_version): without SuccessExitStatus=SIGTERM a run ends Result=signal (of at most 60)" \
  reload_stop_runs 60 until-failure
rm -f "$root/etc/systemd/system/vigild.service.d/old-unit.conf"
in_sandbox systemctl daemon-reload
check "reload-stop ($reload_stop_version): the shipped unit says SuccessExitStatus=SIGTERM" \
  bash -c "[ \"\$(nsenter -t $pid -a systemctl show -P SuccessExitStatus vigild)\" = TERM ]"
check "reload-stop ($reload_stop_version): the shipped unit ends 30 of 30 runs Result=success" \
  reload_stop_runs 30 all

# The directive must not make a rejected reload succeed: the client's exit 1 is no signal.
in_sandbox systemctl reset-failed vigild
in_sandbox systemctl start vigild
write_config '{ "heartbeat": { "interval": -1 } }'
check "reload-stop ($reload_stop_version): a rejected reload still fails systemctl reload" \
  bash -c "! nsenter -t $pid -a systemctl reload vigild"
write_config '{ "heartbeat": { "interval": 0.3, "message": "alive" }, "persistence": { "checkpointInterval": 0 } }'
check "reload-stop ($reload_stop_version): a good reload exits 0" in_sandbox systemctl reload vigild
in_sandbox systemctl stop vigild
