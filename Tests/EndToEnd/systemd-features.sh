# Sourced by run.sh (issue 24): what else systemd gives a daemon, under real systemd — the
# exit without a barrier, credentials, memory pressure, state in the file-descriptor store. Expects vigild
# stopped with the shipped unit; leaves it stopped, its drop-ins removed.
echo "# systemd features: the exit, credentials, memory pressure, fd store"
features_probe=$(dirname "$binary")/vigil-notify-probe
install -m 0755 "$features_probe" "$root/usr/bin/vigil-notify-probe"

# --- the exit: no barrier needed by the process systemd started ---
# vigild, the process systemd started (SYSTEMD_EXEC_PID is its pid), exits without BARRIER=1:
# what it sent is in systemd's queue, which systemd reads before it handles the exit ("so that we
# can still identify to which service an exit message belongs", manager.c). What systemd holds
# once the main process is gone: an ExecStopPost= (with full privileges, '+') records StatusText
# then; after the stop the unit may be unloaded and show nothing.
mkdir -p "$root/etc/systemd/system/vigild.service.d"
printf '[Service]\nExecStopPost=+/bin/sh -c "systemctl show -P StatusText vigild > /run/vigild-stop-status"\n' \
  > "$root/etc/systemd/system/vigild.service.d/stop-status.conf"
in_sandbox systemctl daemon-reload
in_sandbox systemctl start vigild
before=$(cursor)
stop_started=$EPOCHREALTIME
in_sandbox systemctl stop vigild
stop_seconds=$(awk "BEGIN { print $EPOCHREALTIME - $stop_started }")
check "exit: the stop's last STATUS= reached systemd without a barrier (StatusText after the process exited)" bash -c "
  text=\$(cat $root/run/vigild-stop-status); echo \"StatusText='\$text'\"
  [ \"\$text\" = 'Stopping (SIGTERM)…' ] && [ \"\$(nsenter -t $pid -a systemctl show -P Result vigild)\" = success ]"
check "exit: no word of a barrier (stop took ${stop_seconds}s)" bash -c "
  ! nsenter -t $pid -a journalctl -u vigild --after-cursor='$before' --no-pager -o cat | grep -F 'BARRIER=1'"
rm -f "$root/run/vigild-stop-status"
# A frozen manager: systemd (PID 1 of the sandbox) stopped with SIGSTOP, vigild sent SIGTERM
# directly. vigild sends STOPPING=1 and its STATUS= into the frozen manager's queue and exits at
# once (a zombie, as nobody reaps it; before, it waited for a barrier's 1 s bound); systemd,
# thawed, reads the queue before the exit and records the stop's STATUS= (ExecStopPost=).
frozen_exit() {
  in_sandbox systemctl start vigild || return 1
  local host_pid state since waited text
  host_pid=$(pgrep -P "$pid" -x vigild) || { echo "no vigild child of host pid $pid"; return 1; }
  before=$(cursor)
  kill -STOP "$pid"
  since=$EPOCHREALTIME
  kill -TERM "$host_pid"
  for _ in $(seq 1 200); do
    state=$(awk '{ print $3 }' "/proc/$host_pid/stat" 2>/dev/null)
    [ "$state" = Z ] && break
    sleep 0.02
  done
  waited=$(awk "BEGIN { print $EPOCHREALTIME - $since }")
  kill -CONT "$pid"
  echo "state $state after ${waited}s"
  [ "$state" = Z ] && awk "BEGIN { exit !($waited < 0.9) }" &&
    wait_until 10 bash -c "[ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = inactive ]" || return 1
  text=$(cat "$root/run/vigild-stop-status"); echo "StatusText='$text'"
  [ "$text" = 'Stopping (SIGTERM)…' ] && [ "$(in_sandbox systemctl show -P Result vigild)" = success ] &&
    ! in_sandbox journalctl -u vigild --after-cursor="$before" --no-pager -o cat | grep -F 'BARRIER=1'
}
check "exit: under a frozen systemd vigild exits at once, and systemd, thawed, still reads its last STATUS=" frozen_exit
rm -rf "$root/etc/systemd/system/vigild.service.d" "$root/run/vigild-stop-status"
in_sandbox systemctl daemon-reload

# --- credentials: LoadCredential= in a drop-in, read by Credentials.readString ---
# vigil-notify-probe reads the credential and prints what it got (stdout: the journal), as a
# DynamicUser= service like vigild: the credential is readable by that user only.
units=$root/etc/systemd/system
printf '[Service]\nType=oneshot\nDynamicUser=yes\nExecStart=/usr/bin/vigil-notify-probe credential=api-token\n' \
  > "$units/credential-probe.service"
printf 'tok-%s\n' "$RANDOM$RANDOM" > "$root/etc/vigil-api-token"
chmod 0600 "$root/etc/vigil-api-token"
token=$(head -1 "$root/etc/vigil-api-token")
in_sandbox systemctl daemon-reload
check "credentials: without LoadCredential= the probe names the credential and the unit lines" bash -c "
  nsenter -t $pid -a systemctl start credential-probe; out=\$(nsenter -t $pid -a journalctl -u credential-probe --no-pager -o cat | grep 'api-token' | tail -1); echo \"\$out\"
  echo \"\$out\" | grep -qF \"error code=missing: credential 'api-token' is missing: CREDENTIALS_DIRECTORY is not set\" &&
  echo \"\$out\" | grep -qF 'LoadCredential=api-token:/path/to/file' && echo \"\$out\" | grep -qF 'SetCredential=api-token:VALUE'"
mkdir -p "$units/credential-probe.service.d"
printf '[Service]\nLoadCredential=api-token:/etc/vigil-api-token\n' > "$units/credential-probe.service.d/credential.conf"
in_sandbox systemctl daemon-reload
check "credentials: LoadCredential= in a drop-in reaches Credentials.readString under DynamicUser=" bash -c "
  nsenter -t $pid -a systemctl start credential-probe; out=\$(nsenter -t $pid -a journalctl -u credential-probe --no-pager -o cat | grep 'api-token' | tail -1); echo \"\$out\"
  [ \"\$out\" = 'credential api-token=$token' ]"
printf '[Service]\nSetCredential=api-token:from-the-unit\n' > "$units/credential-probe.service.d/credential.conf"
in_sandbox systemctl daemon-reload
check "credentials: SetCredential= works the same" bash -c "
  nsenter -t $pid -a systemctl start credential-probe; out=\$(nsenter -t $pid -a journalctl -u credential-probe --no-pager -o cat | grep 'api-token' | tail -1); echo \"\$out\"
  [ \"\$out\" = 'credential api-token=from-the-unit' ]"
rm -rf "$units/credential-probe.service" "$units/credential-probe.service.d" "$root/etc/vigil-api-token"
in_sandbox systemctl daemon-reload

# --- memory pressure: a FIFO through Environment= (this host's cgroup2 has no memory
# controller, so MemoryPressureWatch= has no memory.pressure to hand over), then a real PSI trigger ---
fifo=/run/vigil-pressure.fifo
mkfifo -m 0666 "$root$fifo"
mkdir -p "$root/etc/systemd/system/vigild.service.d"
# MEMORY_PRESSURE_WRITE emptied: from 254 on systemd sets it (the cgroup's PSI trigger), vigild
# would write it into the FIFO and read its own write back as a report, and the first check
# below would pass on that rather than on the test's write (found by h-kv).
printf '[Service]\nEnvironment=MEMORY_PRESSURE_WATCH=%s MEMORY_PRESSURE_WRITE=\n' "$fifo" > "$root/etc/systemd/system/vigild.service.d/pressure.conf"
in_sandbox systemctl daemon-reload
before=$(cursor)
in_sandbox systemctl start vigild
check "memory pressure: vigild watches the FIFO MEMORY_PRESSURE_WATCH names" await_entry 10 "$before" \
  "e.get('MESSAGE') == 'Watching memory pressure: FIFO $fifo'"
check "memory pressure: no report before the test writes one" test "$(in_sandbox journalctl -u vigild --after-cursor="$before" -o json --no-pager |
  python3 -c 'import json,sys; print(sum(1 for l in sys.stdin if json.loads(l).get("VIGIL_EVENT") == "memory-pressure"))')" = 0
before=$(cursor)
# One writer for all reports (held open by the shell). Each report is one wake-up of the watch
# (bytes that arrive together are one); reports within a second of the last event are dropped
# and counted.
exec {pressure_fd}<>"$root$fifo"
first_report=$EPOCHREALTIME
printf x >&$pressure_fd
for _ in 1 2 3 4; do sleep 0.1; printf x >&$pressure_fd; done  # spaced, so each is its own wake-up
within=$(awk "BEGIN { print $EPOCHREALTIME - $first_report }")
check "memory pressure: a write is a memory-pressure entry with its MESSAGE_ID" await_entry 10 "$before" \
  "e.get('VIGIL_EVENT') == 'memory-pressure' and e.get('MESSAGE_ID') == '0cd2cd838e6e46c182a0fd36b9b59a18' and e.get('PRIORITY') == '5'"
pressure_entries() {
  in_sandbox journalctl -u vigild --after-cursor="$before" -o json --no-pager |
    python3 -c 'import json,sys; print(sum(1 for l in sys.stdin if json.loads(l).get("VIGIL_EVENT") == "memory-pressure"))'
}
if awk "BEGIN { exit !($within < 0.9) }"; then
  check "memory pressure: 4 more reports within the second (${within}s) make no entry (rate limit: one a second)" \
    test "$(pressure_entries)" = 1
fi
sleep 1.1  # past the rate limit's second: nothing to await but the clock
printf x >&$pressure_fd
check "memory pressure: a report after the second is an entry that counts the dropped ones" await_entry 10 "$before" \
  "e.get('VIGIL_EVENT') == 'memory-pressure' and int(e.get('VIGIL_SKIPPED', '0')) >= 1"
exec {pressure_fd}>&-
check "memory pressure: the daemon stays active, heartbeats go on" await_entry 10 "$before" "e.get('MESSAGE') == 'alive'"
in_sandbox systemctl stop vigild
rm -f "$root$fifo"

# The kernel's PSI file, as MemoryPressureWatch= hands the cgroup's: the trigger (200 ms stalled in
# 2 s, with its NUL, as systemd writes it) must be accepted, and a malformed one named.
if [ -w /proc/pressure/memory ]; then
  printf '[Service]\nProcSubset=all\nEnvironment=MEMORY_PRESSURE_WATCH=/proc/pressure/memory MEMORY_PRESSURE_WRITE=%s\n' \
    "$(printf 'some 200000 2000000\0' | base64 -w0)" > "$root/etc/systemd/system/vigild.service.d/pressure.conf"
  in_sandbox systemctl daemon-reload
  before=$(cursor)
  in_sandbox systemctl start vigild
  check "memory pressure: a PSI trigger on /proc/pressure/memory is accepted (DynamicUser=, no capabilities)" await_entry 10 "$before" \
    "e.get('MESSAGE') == \"Watching memory pressure: PSI file /proc/pressure/memory with the trigger 'some 200000 2000000'\""
  in_sandbox systemctl stop vigild
  printf '[Service]\nProcSubset=all\nEnvironment=MEMORY_PRESSURE_WATCH=/proc/pressure/memory MEMORY_PRESSURE_WRITE=%s\n' \
    "$(printf 'some 1 2\0' | base64 -w0)" > "$root/etc/systemd/system/vigild.service.d/pressure.conf"
  in_sandbox systemctl daemon-reload
  before=$(cursor)
  check "memory pressure: a trigger the kernel refuses is a warning naming it; the daemon starts" bash -c "
    nsenter -t $pid -a systemctl start vigild &&
    await_entry 10 '$before' \"e.get('PRIORITY') == '4' and 'the kernel refused the trigger (some 1 2)' in e.get('MESSAGE', '')\""
  in_sandbox systemctl stop vigild
else
  echo "# skipped the PSI trigger checks: /proc/pressure/memory is not writable on this kernel"
fi
rm -rf "$root/etc/systemd/system/vigild.service.d"
in_sandbox systemctl daemon-reload

# --- state across a restart without the disk: a sealed memfd in the fd store ---
# The probe restores the number stored under "counter" (none: 0), stores it plus one, reports it
# and waits: each systemctl restart must see the number the run before stored.
printf '[Service]\nType=notify\nDynamicUser=yes\nFileDescriptorStoreMax=2\nExecStart=/usr/bin/vigil-notify-probe env=LISTEN_FDS snapshot-bump=counter send=READY=1 wait\n' \
  > "$units/snapshot-probe.service"
in_sandbox systemctl daemon-reload
snapshot_after() { # snapshot_after SYSTEMCTL_VERB: what the probe of that run reported (LISTEN_FDS, then its snapshot line)
  local after
  after=$(in_sandbox journalctl -u snapshot-probe -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p')
  in_sandbox systemctl "$1" snapshot-probe || return 1
  # The probe's stdout reaches the journal through journald's stream, which may lag behind
  # READY=1 (CI once read the journal before the line was in it): follow it until this run's
  # snapshot line comes, at most 10 s.
  timeout 10 nsenter -t "$pid" -a journalctl -u snapshot-probe ${after:+--after-cursor="$after"} --no-pager -o cat --follow |
    awk '/^LISTEN_FDS/ { print; next } /^(snapshot counter=|error)/ { print; exit }'
}
same() { [ "$1" = "$2" ] || { printf 'got: %s\nexpected: %s\n' "$1" "$2"; return 1; }; }
out=$(snapshot_after start)
check "fd store: the first start has no snapshot and stores 1" same "${out##*$'\n'}" 'snapshot counter=1'
out=$(snapshot_after restart)
check "fd store: systemctl restart hands the snapshot back (2)" same "${out##*$'\n'}" 'snapshot counter=2'
out=$(snapshot_after restart)
check "fd store: and again (3), with one descriptor passed: the stale snapshot was removed, not kept beside" \
  same "$out" "LISTEN_FDS=1
snapshot counter=3"
in_sandbox systemctl stop snapshot-probe
out=$(snapshot_after start)
check "fd store: systemctl stop empties the store, the next start begins at 1" same "${out##*$'\n'}" 'snapshot counter=1'
in_sandbox systemctl stop snapshot-probe
rm -f "$units/snapshot-probe.service"
in_sandbox systemctl daemon-reload
