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

# The credential lines SystemdUnit(credentials:) prints (issue 23 #3), as systemd reads them: a
# DynamicUser=yes service finds in $CREDENTIALS_DIRECTORY LoadCredential=NAME's file from
# /etc/credstore/, LoadCredential=NAME:PATH's file, SetCredential=NAME:VALUE's value (a
# LoadCredential= of the same name wins over it); a name-only credential missing from every
# store is skipped (the daemon's Credentials.read says it is missing), a missing PATH fails the
# start with 243/CREDENTIALS. (Examples/kv's end-to-end test runs a printed unit that declares one.)
mkdir -p "$root/etc/credstore"
printf 'from-store' > "$root/etc/credstore/creds-store"
printf 'from-path' > "$root/etc/creds-path"
chmod 0600 "$root/etc/credstore/creds-store" "$root/etc/creds-path"
cat > "$root/etc/systemd/system/creds.service" <<'EOF'
[Service]
Type=oneshot
DynamicUser=yes
LoadCredential=creds-store
LoadCredential=creds-path:/etc/creds-path
SetCredential=creds-set:from-unit
SetCredential=creds-both:from-unit
LoadCredential=creds-both:/etc/creds-path
LoadCredential=creds-absent
LoadCredentialEncrypted=creds-absent-encrypted
ExecStart=/bin/sh -c 'for n in creds-store creds-path creds-set creds-both creds-absent creds-absent-encrypted; do echo "$$n=$$(cat "$$CREDENTIALS_DIRECTORY/$$n" 2>/dev/null || echo missing)"; done'
EOF
printf '[Service]\nType=oneshot\nDynamicUser=yes\nLoadCredential=creds-absent:/etc/creds-absent\nExecStart=/bin/true\n' \
  > "$root/etc/systemd/system/creds-path-missing.service"
in_sandbox systemctl daemon-reload
check "units: systemd-analyze verify accepts the credential lines" bash -c "
  out=\$(nsenter -t $pid -a systemd-analyze verify /etc/systemd/system/creds.service 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
check "units: LoadCredential=NAME reads /etc/credstore/NAME, NAME:PATH the file, SetCredential= its value, LoadCredential= wins; a name-only one missing is skipped" bash -c "
  nsenter -t $pid -a systemctl start creds.service || exit 1
  out=\$(nsenter -t $pid -a journalctl -u creds.service --no-pager -o cat | grep '^creds-'); echo \"\$out\"
  [ \"\$out\" = \"\$(printf 'creds-store=from-store\ncreds-path=from-path\ncreds-set=from-unit\ncreds-both=from-path\ncreds-absent=missing\ncreds-absent-encrypted=missing')\" ]"
check "units: LoadCredential=NAME:PATH with PATH missing fails the start (243/CREDENTIALS)" bash -c "
  ! nsenter -t $pid -a systemctl start creds-path-missing.service 2>/dev/null &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ExecMainStatus creds-path-missing.service)\" = 243 ]"
rm -rf "$root/etc/systemd/system/creds.service" "$root/etc/systemd/system/creds-path-missing.service" \
  "$root/etc/credstore/creds-store" "$root/etc/creds-path"
in_sandbox systemctl daemon-reload

# What SystemdUnit(writablePaths:) prints ReadWritePaths= for: under the sandbox every printed
# unit has (vigild's, DynamicUser=yes, ProtectSystem=strict, PrivateUsers=yes, …), a directory
# the service's user may write (mode 1777 here, so that only the sandbox decides) is read-only
# without the line and writable with it. The printed unit, turned into a one-shot that writes
# there, with directories of its own (not vigild's).
mkdir -p "$root/srv/inbox"
chmod 1777 "$root/srv/inbox"
for writable in no yes; do
  rm -f "$root/srv/inbox/written"
  edits=(-e 's/^Type=notify$/Type=oneshot/'
    -e "s|^ExecStart=.*|ExecStart=/bin/sh -c 'echo written > /srv/inbox/written'|"
    -e '/^ExecReload=/d' -e '/^Restart=/d' -e '/^RestartSec=/d'
    -e 's/^\(StateDirectory\|RuntimeDirectory\|ConfigurationDirectory\)=vigild$/\1=rwp/')
  [ "$writable" = yes ] && edits+=(-e '/^ProtectSystem=strict$/a ReadWritePaths=/srv/inbox')
  in_sandbox vigild systemd-unit | sed "${edits[@]}" > "$root/etc/systemd/system/rwp.service"
  in_sandbox systemctl daemon-reload
  if [ "$writable" = yes ]; then
    check "units: ReadWritePaths=/srv/inbox: the sandboxed service writes there" bash -c "
      grep -qx 'ReadWritePaths=/srv/inbox' $root/etc/systemd/system/rwp.service &&
      nsenter -t $pid -a systemctl start rwp.service && [ \"\$(cat $root/srv/inbox/written)\" = written ]"
  else
    check "units: without ReadWritePaths=, ProtectSystem=strict keeps /srv/inbox read-only to the service" bash -c "
      grep -qx 'ProtectSystem=strict' $root/etc/systemd/system/rwp.service &&
      ! nsenter -t $pid -a systemctl start rwp.service 2>/dev/null && [ ! -e $root/srv/inbox/written ]"
    check "units: and the service's error says why (Read-only file system)" wait_until 5 bash -c "
      nsenter -t $pid -a journalctl -u rwp.service --no-pager -o cat | grep -q 'Read-only file system'"
  fi
  in_sandbox systemctl reset-failed rwp.service 2>/dev/null || true
done
# A writable path that does not exist fails the start (what the declaration's docs say).
sed -i 's|^ReadWritePaths=/srv/inbox$|ReadWritePaths=/srv/absent|' "$root/etc/systemd/system/rwp.service"
in_sandbox systemctl daemon-reload
check "units: a ReadWritePaths= directory that does not exist fails the start (226/NAMESPACE)" bash -c "
  grep -qx 'ReadWritePaths=/srv/absent' $root/etc/systemd/system/rwp.service &&
  ! nsenter -t $pid -a systemctl start rwp.service 2>/dev/null &&
  s=\$(nsenter -t $pid -a systemctl show -P ExecMainStatus rwp.service); echo \"ExecMainStatus=\$s\"; [ \"\$s\" = 226 ]"
in_sandbox systemctl reset-failed rwp.service 2>/dev/null || true
rm -rf "$root/etc/systemd/system/rwp.service" "$root/srv/inbox"
in_sandbox systemctl daemon-reload

# What SystemdUnit(outboundNetwork:) changes, the three lines its unit test pins (no
# PrivateNetwork=yes, no IPAddressDeny=any, AF_INET and AF_INET6 allowed): vigild's printed unit,
# turned into a one-shot that connects to a TCP server on another address of the container's
# network (a veth pair in the container's namespace: this kernel has no dummy links), reaches it
# only with them. loopbackNetwork's lines do not reach it.
nsenter -t "$pid" -n ip link add vigil-out type veth peer name vigil-peer
nsenter -t "$pid" -n ip addr add 10.213.0.1/24 dev vigil-out
nsenter -t "$pid" -n ip link set vigil-peer up
nsenter -t "$pid" -n ip link set vigil-out up
nsenter -t "$pid" -n timeout 120 python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.213.0.1", 7300)); s.listen()
while True:
    c, _ = s.accept(); c.sendall(b"reached\n"); c.close()' &
outbound_server=$!
wait_until 5 nsenter -t "$pid" -n python3 -c 'import socket; socket.create_connection(("10.213.0.1", 7300), timeout=1)'
for network in sealed loopback outbound; do
  edits=(-e 's/^Type=notify$/Type=oneshot/'
    -e "s|^ExecStart=.*|ExecStart=/usr/bin/python3 -c 'import socket; print(socket.create_connection((\"10.213.0.1\", 7300), timeout=2).makefile().readline().strip())'|"
    -e '/^ExecReload=/d' -e '/^Restart=/d' -e '/^RestartSec=/d'
    -e 's/^\(StateDirectory\|RuntimeDirectory\|ConfigurationDirectory\)=vigild$/\1=outbound/')
  case $network in
    loopback) edits+=(-e '/^PrivateNetwork=yes$/d' -e 's/^RestrictAddressFamilies=AF_UNIX$/& AF_INET AF_INET6/'
      -e '/^IPAddressDeny=any$/a IPAddressAllow=localhost') ;;
    outbound) edits+=(-e '/^PrivateNetwork=yes$/d' -e 's/^RestrictAddressFamilies=AF_UNIX$/& AF_INET AF_INET6/'
      -e '/^IPAddressDeny=any$/d') ;;
  esac
  in_sandbox vigild systemd-unit | sed "${edits[@]}" > "$root/etc/systemd/system/outbound.service"
  in_sandbox systemctl daemon-reload
  if [ "$network" = outbound ]; then
    check "units: outboundNetwork's lines: the sandboxed service reaches another host's address" bash -c "
      ! grep -q '^PrivateNetwork=\|^IPAddressDeny=' $root/etc/systemd/system/outbound.service &&
      { nsenter -t $pid -a systemctl start outbound.service ||
        { nsenter -t $pid -a journalctl -u outbound.service --no-pager -o cat | tail -n 5; false; }; }"
    check "units: and it read the server's answer" wait_until 5 bash -c "
      nsenter -t $pid -a journalctl -u outbound.service --no-pager -o cat | grep -qx reached"
  else
    check "units: $network network lines: the sandboxed service cannot reach another host's address" bash -c "
      grep -q '^IPAddressDeny=any' $root/etc/systemd/system/outbound.service &&
      ! nsenter -t $pid -a systemctl start outbound.service 2>/dev/null"
    # And for the network's reason: sealed, no IP socket at all (RestrictAddressFamilies=AF_UNIX,
    # before the private namespace's missing route); loopback, packets dropped by the filter.
    case $network in sealed) why='Address family not supported by protocol' ;; *) why='timed out' ;; esac
    check "units: $network network lines: the connection fails with '$why'" wait_until 5 bash -c "
      nsenter -t $pid -a journalctl -u outbound.service --no-pager -o cat | grep -q '$why'"
  fi
  in_sandbox systemctl reset-failed outbound.service 2>/dev/null || true
done
kill "$outbound_server" 2>/dev/null; wait "$outbound_server" 2>/dev/null || true
nsenter -t "$pid" -n ip link del vigil-out
rm -f "$root/etc/systemd/system/outbound.service"
in_sandbox systemctl daemon-reload
