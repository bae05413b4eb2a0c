#!/usr/bin/env bash
# Installs the .deb with `apt install` in a real systemd with no Swift toolchain (removed from
# the sandbox's overlay; the host keeps it) and checks that the service runs, reloads, logs to
# the journal, and stops on removal: on Debian 12 (systemd 252, the host's root) and Debian 13
# (systemd 257, a root of its own: see lib.sh), at once. Needs root.
#
#   package.sh VIGILD_DEB
#
# Prints one line per check, each naming its systemd ("257: …"), and a closing
# "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deb=$(realpath "$1")
work=$(mktemp -d /tmp/vigil-deb.XXXXXX)
# shellcheck source=lib.sh
. "$here/lib.sh"
per_systemd_version "252 257" "$0" "$deb"

pid=$(boot_systemd "$work/systemd") || { echo "FAIL - ${check_prefix}boot systemd"; echo "0 passed, 1 failed"; exit 1; }
root=/proc/$pid/root
check_booted_version
# A clean Debian 12 has no Swift: remove the toolchain from the sandbox's view (the Debian 13
# root never had it).
rm -rf "$root/opt/swift"
# Container images carry Docker's policy-rc.d, which forbids starting services; Debian does not.
rm -f "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/tmp/"
name=$(basename "$deb")
check "no Swift toolchain in the sandbox" bash -c "! nsenter -t $pid -a sh -c 'command -v swift || ls /opt/swift' "
check "apt install ./$name" in_sandbox env DEBIAN_FRONTEND=noninteractive apt-get install -y "/tmp/$name"
check "the package started the service" bash -c "[ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" = active ]"
check "/etc/vigild/vigild.json is a conffile and valid" bash -c "
  nsenter -t $pid -a dpkg-query -W -f='\${Conffiles}' vigild | grep -q /etc/vigild/vigild.json &&
  nsenter -t $pid -a vigild check-config /etc/vigild/vigild.json"
check "vigild status works for the admin" bash -c "nsenter -t $pid -a vigild status | grep -q 'running, configuration generation 1'"
check "systemctl reload applies a change" bash -c "
  sed -i 's/\"alive\"/\"packaged\"/' $root/etc/vigild/vigild.json &&
  nsenter -t $pid -a systemctl reload vigild &&
  nsenter -t $pid -a vigild status --json | grep -q '\"message\": \"packaged\"'"
check "man vigild and man vigild.json show the installed pages" bash -c "
  nsenter -t $pid -a env MANPAGER=cat COLUMNS=100 man vigild | grep -q 'vigild reload' &&
  nsenter -t $pid -a env MANPAGER=cat COLUMNS=100 man vigild.json | grep -q 'heartbeat.interval'"
check "bash completion is installed where Debian keeps it" bash -c "
  nsenter -t $pid -a bash -c '. /usr/share/bash-completion/completions/vigild && COMP_WORDS=(vigild rel) COMP_CWORD=1 && _vigild && [ \"\${COMPREPLY[*]}\" = reload ]'"
check "the journal catalog is installed and compiled (journalctl --list-catalog)" bash -c "
  nsenter -t $pid -a journalctl --list-catalog 9475ebda59634e2fb407cda3695425bc | grep -q 'rejected a configuration reload'"
cp "$root/etc/vigild/vigild.json" "$work/good.json"
printf '{ \"heartbeat\": { \"interval\": -1 } }\n' > "$root/etc/vigild/vigild.json"
check "a rejected reload: systemctl reload fails and journalctl -x explains it" bash -c "
  ! nsenter -t $pid -a systemctl reload vigild &&
  nsenter -t $pid -a journalctl -x -u vigild --no-pager -n 20 MESSAGE_ID=9475ebda59634e2fb407cda3695425bc > $work/explained &&
  cat $work/explained && grep -q 'Subject: vigild rejected a configuration reload' $work/explained &&
  grep -q 'Nothing changed: the daemon keeps running on configuration generation 2' $work/explained &&
  grep -q 'vigild check-config' $work/explained"
cp "$work/good.json" "$root/etc/vigild/vigild.json"
check "journalctl shows the daemon's entries" bash -c "nsenter -t $pid -a journalctl -u vigild --no-pager -o verbose | grep -q 'MESSAGE_ID=61ece635e54942e1b9c1dd26c92678c0'"
check "apt remove stops the service" bash -c "
  nsenter -t $pid -a env DEBIAN_FRONTEND=noninteractive apt-get remove -y vigild >/dev/null &&
  [ \"\$(nsenter -t $pid -a systemctl show -P ActiveState vigild)\" != active ]"
check "apt purge removes configuration and state" bash -c "
  nsenter -t $pid -a env DEBIAN_FRONTEND=noninteractive apt-get purge -y vigild >/dev/null &&
  [ ! -e $root/etc/vigild/vigild.json ] && [ ! -e $root/var/lib/private/vigild ]"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
