# The units the library prints (issue 23 #3), under the booted systemd: the installed
# vigild.service (systemd/vigild.service) is `vigild systemd-unit` byte for byte, and the .socket
# unit `vigild systemd-unit --socket` prints is one systemd-analyze verify accepts next to it.
# (run.sh checks the shipped unit's verify and its exposure, 1.0 or less.) Sourced by run.sh;
# needs nothing running; leaves no unit behind.
echo "# printed units"
check "units: the installed vigild.service is what vigild systemd-unit prints" bash -c "
  nsenter -t $pid -a vigild systemd-unit > $work/printed.service &&
  cmp $work/printed.service $root/etc/systemd/system/vigild.service"
in_sandbox vigild systemd-unit --socket /run/vigild/vigild.sock > "$root/etc/systemd/system/vigild.socket"
check "units: systemd-analyze verify accepts the printed .socket unit" bash -c "
  out=\$(nsenter -t $pid -a systemd-analyze verify /etc/systemd/system/vigild.socket 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
rm -f "$root/etc/systemd/system/vigild.socket"
