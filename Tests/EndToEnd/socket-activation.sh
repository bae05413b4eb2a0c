# Sourced by run.sh under systemd 252: socket activation (issue 11 #3) with a real .socket unit,
# and the file-descriptor store across `systemctl restart` without one. vigil-socket-probe (built
# next to vigild) adopts the socket named "http" through ListeningSocket (or binds) and answers
# each connection with one line saying what it adopted and what is left of LISTEN_*. Needs
# nothing from the vigild unit; leaves its own units stopped.
echo "# socket activation"
probe=$(dirname "$binary")/vigil-socket-probe
units=$root/etc/systemd/system
check "socket activation: vigil-socket-probe is built next to vigild" test -x "$probe"
install -m 0755 "$probe" "$root/usr/bin/vigil-socket-probe"
# ask PORT: one line from the probe through the sandbox's loopback.
ask() { in_sandbox timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && cat <&3"; }
write_pair() { # write_pair NAME SOCKET_SECTION: NAME.socket with that [Socket] body, NAME.service running the probe
  printf '[Socket]\n%s\n' "$2" > "$units/$1.socket"
  printf '[Service]\nExecStart=/usr/bin/vigil-socket-probe http 1000\n' > "$units/$1.service"
}
write_pair probe-http $'ListenStream=127.0.0.1:8080\nFileDescriptorName=http'
write_pair probe-noname 'ListenStream=127.0.0.1:8081'
write_pair probe-datagram $'ListenDatagram=127.0.0.1:8082\nFileDescriptorName=http'
write_pair probe-accept $'ListenStream=127.0.0.1:8083\nFileDescriptorName=http\nAccept=yes'
# Accept=yes needs a template service.
mv "$units/probe-accept.service" "$units/probe-accept@.service"
in_sandbox systemctl daemon-reload
in_sandbox systemctl start probe-http.socket probe-noname.socket probe-datagram.socket probe-accept.socket

check "socket activation: the first connection starts the service, which answers on the adopted socket" bash -c "
  line=\$(nsenter -t $pid -a timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 && cat <&3'); echo \"\$line\"
  [ \"\$line\" = 'origin=adopted:http fd=3 address=127.0.0.1:8080 cloexec=1 LISTEN_PID=- LISTEN_FDS=- LISTEN_FDNAMES=- NOTIFY_SOCKET=- again=alreadyAdopted' ] &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState probe-http.service)\" = active ]"
check "socket activation: a restarted service adopts the same socket again" bash -c "
  first=\$(nsenter -t $pid -a systemctl show -P MainPID probe-http.service)
  nsenter -t $pid -a systemctl restart probe-http.service &&
  [ \"\$(nsenter -t $pid -a systemctl show -P MainPID probe-http.service)\" != \"\$first\" ] &&
  nsenter -t $pid -a timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 && cat <&3' | grep -q '^origin=adopted:http fd=3 '"
# The refusals: the service exits 1 at once and the journal says which line the unit needs.
ask 8081 >/dev/null 2>&1
check "socket activation: without FileDescriptorName= the error names the unit's default name" wait_until 10 bash -c "
  nsenter -t $pid -a journalctl -u probe-noname.service --no-pager -o cat |
  grep -qF \"error: notPassed: systemd passed fd 3 'probe-noname.socket' but none named 'http': set FileDescriptorName=http in the .socket unit\""
in_sandbox bash -c 'echo hello > /dev/udp/127.0.0.1/8082'
check "socket activation: a datagram socket is refused with the ListenStream= to use" wait_until 10 bash -c "
  nsenter -t $pid -a journalctl -u probe-datagram.service --no-pager -o cat |
  grep -qF \"error: unusable: fd 3 'http' is a datagram socket: use ListenStream=127.0.0.1:0 (not ListenDatagram=) in the .socket unit\""
ask 8083 >/dev/null 2>&1
# systemd before 257 names an Accept=yes connection 'connection', ignoring FileDescriptorName=;
# 257 passes it under FileDescriptorName= (NEWS: an incompatible change of 257).
if [ "${VIGIL_E2E_SYSTEMD:-252}" -ge 257 ]; then
  accept_error="error: unusable: fd 3 'http' is a stream socket that is not listening (a connection, as Accept=yes passes): use Accept=no in the .socket unit"
else
  accept_error="error: unusable: systemd passed fd 3 'connection', a connection rather than a listening socket, as Accept=yes passes (systemd before 257 names it so whatever FileDescriptorName= says): use Accept=no in the .socket unit"
fi
accept_refused() {
  wait_until 10 bash -c "nsenter -t $pid -a journalctl --no-pager -o cat -u 'probe-accept@*' | grep -qF \"$accept_error\"" ||
    { in_sandbox journalctl --no-pager -o cat -u 'probe-accept*' | uniq -c | tail -n 8; return 1; }
}
check "socket activation: a connection (Accept=yes) is refused with Accept=no to use" accept_refused
in_sandbox systemctl stop probe-http.socket probe-noname.socket probe-datagram.socket probe-accept.socket \
  probe-http.service probe-noname.service probe-datagram.service
in_sandbox systemctl reset-failed

# --- the file-descriptor store: no .socket unit; the probe binds, stores the socket, and after a
# restart adopts it back. A request loop (one connection at a time) runs across the restart.
cat > "$root/tmp/request-loop.py" <<'PY'
# request-loop.py PORT DIRECTORY: connects one at a time until 5 answers came after DIRECTORY/restarted
# appeared (or 30 s passed); creates DIRECTORY/answering at the first answer; prints
# "answered refused dropped".
import os, socket, sys, time
port, directory = int(sys.argv[1]), sys.argv[2]
answered = refused = dropped = after_restart = 0
deadline = time.monotonic() + 30
while after_restart < 5 and time.monotonic() < deadline:
    restarted = os.path.exists(directory + "/restarted")
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect(("127.0.0.1", port))
        if s.makefile().read():
            answered += 1
            after_restart += restarted
            if answered == 1:
                open(directory + "/answering", "w").close()
        else:
            dropped += 1
    except ConnectionRefusedError:
        refused += 1
    except OSError:
        dropped += 1
    finally:
        s.close()
print(answered, refused, dropped)
PY
# restart_under_load UNIT PORT: prints "answered refused dropped" for a loop across a restart.
restart_under_load() {
  local unit=$1 port=$2 directory=/tmp/loop-$1
  in_sandbox mkdir -p "$directory"
  nsenter -t "$pid" -a python3 /tmp/request-loop.py "$port" "$directory" > "$work/$unit.counts" &
  local loop=$!
  # Type=notify: restart returns once the new process is ready.
  wait_until 10 test -e "$root$directory/answering" >&2 && in_sandbox systemctl restart "$unit" >&2
  touch "$root$directory/restarted"
  wait "$loop"
  cat "$work/$unit.counts"
}
printf '[Service]\nType=notify\nExecStart=/usr/bin/vigil-socket-probe http 1000000 --store 8090\nFileDescriptorStoreMax=1\n' \
  > "$units/probe-store.service"
printf '[Service]\nType=notify\nExecStart=/usr/bin/vigil-socket-probe http 1000000 --store 8091\n' \
  > "$units/probe-nostore.service"
in_sandbox systemctl daemon-reload
in_sandbox systemctl start probe-store probe-nostore
read -r answered refused dropped < <(restart_under_load probe-store 8090)
check "fd store: 0 of $answered requests refused or dropped across systemctl restart (refused $refused, dropped $dropped)" \
  bash -c "[ '$refused' = 0 ] && [ '$dropped' = 0 ] && [ '${answered:-0}' -gt 5 ]"
check "fd store: the first probe bound 127.0.0.1:8090, the restarted one adopted it from the store as 'http'" bash -c "
  out=\$(nsenter -t $pid -a journalctl -u probe-store.service --no-pager -o cat | grep '^origin=')
  echo \"\$out\"
  [ \"\$(echo \"\$out\" | cut -d' ' -f1-3)\" = 'origin=bound fd=3 address=127.0.0.1:8090
origin=adopted:http fd=3 address=127.0.0.1:8090' ]"
read -r answered_without refused_without dropped_without < <(restart_under_load probe-nostore 8091)
echo "# without FileDescriptorStoreMax=: $refused_without of $((answered_without + refused_without + dropped_without)) requests refused, $dropped_without dropped across the restart"
in_sandbox systemctl stop probe-store probe-nostore
in_sandbox systemctl reset-failed
