# The units the library prints (issue 23 #3), under the booted systemd: the installed
# vigild.service (systemd/vigild.service) is `vigild systemd-unit` byte for byte; the .socket unit
# `vigild systemd-unit --socket` prints passes systemd-analyze verify; and what
# RuntimeDirectoryPreserve=yes (declared by socketInRuntimeDirectory) is for. (run.sh checks the
# shipped unit's verify and its exposure, 1.0 or less.) Sourced by run.sh; leaves no unit behind.
echo "# printed units"
check "units: the installed vigild.service is what vigild systemd-unit prints" bash -c "
  nsenter -t $pid -a vigild systemd-unit > $work/printed.service &&
  cmp $work/printed.service $root/etc/systemd/system/vigild.service"
in_sandbox vigild systemd-unit --socket /run/vigild/vigild.sock > "$root/etc/systemd/system/vigild.socket"
check "units: systemd-analyze verify accepts the printed .socket unit" bash -c "
  out=\$(nsenter -t $pid -a systemd-analyze verify /etc/systemd/system/vigild.socket 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
rm -f "$root/etc/systemd/system/vigild.socket"

# Why `socketInRuntimeDirectory` adds RuntimeDirectoryPreserve=yes: a .socket unit whose socket
# lives in the service's runtime directory, served by a small Python server that takes the socket
# systemd passes (fd 3) and answers each connection with "served". Without the directive,
# stopping the service deletes /run/rdp with the socket file in it while rdp.socket still listens:
# the next client finds no socket. With it, the file stays and the next connection starts the
# service again.
# connect_rdp: one line from /run/rdp/rdp.sock inside the sandbox, or a failure.
connect_rdp() {
  in_sandbox timeout 10 python3 -c '
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("/run/rdp/rdp.sock")
print(s.makefile().readline().strip())'
}
export -f in_sandbox connect_rdp
mkdir -p "$root/usr/local/bin"
printf '%s\n' '#!/usr/bin/python3' 'import socket' 's = socket.socket(fileno=3)' 'while True:' \
  '    c, _ = s.accept(); c.sendall(b"served\n"); c.close()' > "$root/usr/local/bin/rdp-server"
chmod 0755 "$root/usr/local/bin/rdp-server"
for preserve in no yes; do
  printf '[Socket]\nListenStream=/run/rdp/rdp.sock\n' > "$root/etc/systemd/system/rdp.socket"
  printf '[Service]\nExecStart=/usr/local/bin/rdp-server\nRuntimeDirectory=rdp\nRuntimeDirectoryPreserve=%s\n' \
    "$preserve" > "$root/etc/systemd/system/rdp.service"
  in_sandbox systemctl daemon-reload
  in_sandbox systemctl start rdp.socket
  check "units: RuntimeDirectoryPreserve=$preserve: the first connection starts the service" bash -c "
    line=\$(connect_rdp) && echo \"\$line\" && [ \"\$line\" = served ]"
  in_sandbox systemctl stop rdp.service 2>/dev/null
  if [ "$preserve" = yes ]; then
    check "units: RuntimeDirectoryPreserve=yes: the socket file outlives the stop and the next client is served" bash -c "
      test -S $root/run/rdp/rdp.sock && line=\$(connect_rdp) && [ \"\$line\" = served ]"
  else
    check "units: RuntimeDirectoryPreserve=no: the stop deletes the socket file the .socket unit still listens on" bash -c "
      [ ! -e $root/run/rdp/rdp.sock ] && [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState rdp.socket)\" = active ] &&
      ! connect_rdp"
  fi
  in_sandbox systemctl stop rdp.socket rdp.service
  rm -rf "$root/run/rdp"
done
rm -f "$root/etc/systemd/system/rdp.socket" "$root/etc/systemd/system/rdp.service" "$root/usr/local/bin/rdp-server"
in_sandbox systemctl daemon-reload
