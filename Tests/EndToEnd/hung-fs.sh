# Sourced by run.sh under systemd 252: a configuration on a hung file system (issue 21 #7). A
# FUSE file system that hangs on demand (hangfs.py) is mounted inside the booted systemd, the
# unit reads its configuration from it; a read that never returns rejects the reload naming the
# path within the 5 s deadline, the watchdog keeps pinging, `systemctl stop` ends it cleanly, and
# a start whose read hangs fails instead of waiting for TimeoutStartSec=. The unit is stopped
# when this section begins and when it ends.
echo "# a configuration on a hung file system"
hangfs_config=/srv/vigil-hangfs/vigild.json
install -m 0644 "$here/hangfs.py" "$root/usr/local/lib/vigil-hangfs.py"
# boot-systemd.sh's /dev holds a few nodes; FUSE needs its own (misc 229).
in_sandbox sh -c '[ -c /dev/fuse ] || mknod -m 0666 /dev/fuse c 10 229'
in_sandbox mkdir -p /srv/vigil-hangfs /run/vigil-hangfs/source /run/vigil-hangfs/control
printf '%s\n' '{ "heartbeat": { "interval": 0.3, "message": "on fuse" }, "persistence": { "checkpointInterval": 0 } }' \
  > "$root/run/vigil-hangfs/source/vigild.json"
# The server runs inside the sandbox (its pid namespace ends it at power-off at the latest).
nsenter -t "$pid" -a /usr/bin/python3 /usr/local/lib/vigil-hangfs.py /srv/vigil-hangfs \
  /run/vigil-hangfs/source /run/vigil-hangfs/control > "$work/hangfs.log" 2>&1 &
hangfs_server=$!
# Needs fuse3 and python3-fusepy in the booted root (packaging/build-deps.sh installs them on the host).
hangfs_mounted() { wait_until 15 test -e "$root/run/vigil-hangfs/control/ready" || { cat "$work/hangfs.log"; return 1; }; }
check "hung fs: the FUSE file system is mounted in the sandbox" hangfs_mounted
hang() { touch "$root/run/vigil-hangfs/control/hang-$1"; }
answer() { rm -f "$root/run/vigil-hangfs/control/hang-"*; }
mkdir -p "$root/etc/systemd/system/vigild.service.d"
printf '[Service]\nExecStart=\nExecStart=/usr/bin/vigild run --config %s\n' "$hangfs_config" \
  > "$root/etc/systemd/system/vigild.service.d/hangfs.conf"
in_sandbox systemctl daemon-reload
before=$(cursor)
check "hung fs: the unit starts with its configuration on the FUSE mount" bash -c "
  nsenter -t $pid -a systemctl start vigild &&
  await_entry 10 '$before' \"e.get('MESSAGE') == 'on fuse'\""
main_pid=$(show MainPID)
restarts=$(show NRestarts)
hang read
started=$EPOCHREALTIME
check "hung fs: systemctl reload fails (the read hangs)" bash -c "! nsenter -t $pid -a systemctl reload vigild"
took=$(awk "BEGIN { print $EPOCHREALTIME - $started }")
check "hung fs: the reader was inside the hung read" test -e "$root/run/vigil-hangfs/control/hung-read"
check "hung fs: the reload was answered within the deadline (5 s, took $took s)" \
  awk "BEGIN { exit !($took >= 5 && $took < 12) }"
check "hung fs: StatusText names the path and says it did not answer in 5 s" bash -c "
  s=\$(nsenter -t $pid -a systemctl show -P StatusText vigild); echo \"\$s\"
  case \"\$s\" in *'reload rejected'*'$hangfs_config'*'did not answer in 5 s'*) ;; *) exit 1 ;; esac"
check "hung fs: still active, same MainPID, no restart" bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID vigild)\" = $main_pid ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P NRestarts vigild)\" = $restarts ]"
# WatchdogSec=30s: a ping every 15 s; systemd records the time of the last one.
last_ping=$(show WatchdogTimestampMonotonic)
check "hung fs: the watchdog is pinged while the read still hangs" wait_until 25 bash -c "
  [ \"\$(nsenter -t $pid -a systemctl show -P WatchdogTimestampMonotonic vigild)\" != '$last_ping' ]"
before=$(cursor)
check "hung fs: heartbeats go on with the configuration in force" await_entry 10 "$before" "e.get('MESSAGE') == 'on fuse'"
started=$EPOCHREALTIME
check "hung fs: systemctl stop ends it with Result=success while the read hangs" bash -c "
  nsenter -t $pid -a systemctl stop vigild &&
  [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainStatus vigild)\" = 0 ]"
took=$(awk "BEGIN { print $EPOCHREALTIME - $started }")
check "hung fs: the stop was prompt ($took s)" awk "BEGIN { exit !($took < 5) }"
answer
rm -f "$root/run/vigil-hangfs/control/hung-"*
hang open
before=$(cursor)
started=$EPOCHREALTIME
check "hung fs: a start whose read hangs fails" bash -c "! nsenter -t $pid -a systemctl start vigild"
took=$(awk "BEGIN { print $EPOCHREALTIME - $started }")
check "hung fs: ... within the deadline, not at TimeoutStartSec= ($took s)" awk "BEGIN { exit !($took >= 5 && $took < 12) }"
check "hung fs: ... and the journal names the path and says it did not answer in 5 s" await_entry 10 "$before" \
  "'$hangfs_config' in e.get('MESSAGE', '') and 'did not answer in 5 s' in e.get('MESSAGE', '')"
in_sandbox systemctl stop vigild
answer
in_sandbox umount /srv/vigil-hangfs
wait "$hangfs_server"
rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload
in_sandbox systemctl reset-failed vigild 2>/dev/null
