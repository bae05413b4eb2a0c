# Sourced by run.sh under systemd 252: socket activation (issue 11 #3) with a real .socket unit.
# vigil-socket-probe (built next to vigild) adopts the socket named "http" through
# ListeningSocket and answers each connection with one line saying what it adopted and what is
# left of LISTEN_*. Needs nothing from the vigild unit; leaves its own units stopped.
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
  [ \"\$line\" = 'origin=adopted:http fd=3 address=127.0.0.1:8080 cloexec=1 LISTEN_PID=- LISTEN_FDS=- LISTEN_FDNAMES=- NOTIFY_SOCKET=-' ] &&
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
  grep -qF \"error: notAStreamSocket: fd 3 'http' is a datagram socket: use ListenStream=127.0.0.1:0 (not ListenDatagram=) in the .socket unit\""
ask 8083 >/dev/null 2>&1
# systemd names an Accept=yes connection 'connection', ignoring FileDescriptorName=.
check "socket activation: a connection (Accept=yes) is refused with Accept=no to use" wait_until 10 bash -c "
  nsenter -t $pid -a journalctl --no-pager -o cat -u 'probe-accept@*' |
  grep -qF \"error: notListening: systemd passed fd 3 'connection', a connection rather than a listening socket, as Accept=yes passes (under that name whatever FileDescriptorName= says): use Accept=no in the .socket unit\""
in_sandbox systemctl stop probe-http.socket probe-noname.socket probe-datagram.socket probe-accept.socket \
  probe-http.service probe-noname.service probe-datagram.service
in_sandbox systemctl reset-failed
