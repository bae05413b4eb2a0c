# Shared by run.sh, package.sh and the examples' suites: checks that print one line each, the
# systemd versions a suite runs on, and the teardown of the systemd they boot. Source it after
# setting `work`; set `pid` once systemd runs (boot_systemd boots the one this process runs on).
#
# VIGIL_E2E_SYSTEMD names the systemd a suite runs on: one version (this process boots it and
# checks there, every check line prefixed "VERSION: "), or several (each script's default:
# per_systemd_version then runs the script once per version, in parallel).
#   252  the host's (Debian 12)
#   254  Debian 12's bookworm-backports, unpacked by fetch-systemd-254.sh and laid over the host's
#        root
#   257  Debian 13's, booted from a Debian 13 root made by fetch-debian-13.sh (bookworm's glibc
#        cannot run it), with the host's Swift runtime bound in for a debug build
# Both are kept under VIGIL_E2E_CACHE (/var/cache/vigil-e2e) across runs.
pid=""
passed=0
failed=0
vigil_e2e=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VIGIL_E2E_CACHE=${VIGIL_E2E_CACHE:-/var/cache/vigil-e2e}
# A stopped run (CI's time-out, ^C) still powers its systemd off.
trap 'exit 143' TERM INT HUP

teardown() {
  local job
  for job in "${version_jobs[@]}"; do kill -s TERM "$job" 2>/dev/null; done
  [ ${#version_jobs[@]} -eq 0 ] || wait
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # An nsenter into the sandbox left behind (a background client): nsenter stops itself when
    # its child stops, and a stopped nsenter never reaps its child, so the sandbox's init waited
    # for it forever after the poweroff (kv's suite left its 252 and 254 sandboxes so, every run).
    pkill -KILL -f "^nsenter -t $pid " 2>/dev/null
    kill -s SIGRTMIN+4 "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -s KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$work" 2>/dev/null || true
}
trap teardown EXIT

check() { # check NAME COMMAND...: runs the command, records the result
  local name=$1; shift
  local output started=$EPOCHREALTIME
  if output=$("$@" 2>&1); then
    passed=$((passed + 1)); printf 'ok   - %s%s (%.2fs)\n' "$check_prefix" "$name" "$(awk "BEGIN { print $EPOCHREALTIME - $started }")"
  else
    # The first lines of the output on the FAIL line too: a runner that keeps only FAIL lines
    # (EndToEndTests' expectation, CI's excerpt) still says why.
    local why
    why=$(printf '%s\n' "$output" | grep -v '^[[:space:]]*$' | head -n 3 | tr '\n' '|' | cut -c1-400)
    failed=$((failed + 1)); echo "FAIL - $check_prefix$name${why:+ — ${why%|}}"
    printf '%s\n' "$output" | sed 's/^/       /' | tail -n 20
  fi
}

in_sandbox() { nsenter -t "$pid" -a "$@"; }

# start_unit UNIT: systemctl start, and on failure the unit's last journal lines (why it failed).
start_unit() {
  in_sandbox systemctl start "$1" || { in_sandbox journalctl -u "$1" --no-pager | tail -n 15; return 1; }
}

# --- the systemd versions ---
version_jobs=()
check_prefix=""
case ${VIGIL_E2E_SYSTEMD:-} in *' '*|'') ;; *) check_prefix="$VIGIL_E2E_SYSTEMD: " ;; esac

# per_systemd_version DEFAULT_VERSIONS SCRIPT ARGUMENTS...: with one version in VIGIL_E2E_SYSTEMD,
# returns and the script goes on there. Otherwise runs `SCRIPT ARGUMENTS` once per version (those
# of VIGIL_E2E_SYSTEMD, else DEFAULT_VERSIONS), all at once, each with a systemd of its own;
# prints each one's lines in version order as they end, then "N passed, M failed" for all, and
# exits non-zero if any check failed.
per_systemd_version() {
  local versions=${VIGIL_E2E_SYSTEMD:-$1} script=$2; shift 2
  case $versions in *' '*) ;; *) return 0 ;; esac
  local version line total_passed=0 total_failed=0 started=$SECONDS
  local -A job=()
  echo "# systemd $versions at once; each one's lines follow when it is done"
  for version in $versions; do
    VIGIL_E2E_SYSTEMD=$version bash "$script" "$@" >"$work/$version.log" 2>&1 </dev/null &
    job[$version]=$!
    version_jobs+=("$!")
  done
  for version in $versions; do
    wait "${job[$version]}"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$version.log" | tail -n 1)
    grep -vxF "${line:-none}" "$work/$version.log"
    if [ -n "$line" ]; then
      echo "# $version: $line"
      total_passed=$((total_passed + ${line%% *}))
      line=${line#*, }; total_failed=$((total_failed + ${line%% *}))
    else
      echo "FAIL - $version: the suite ended without its closing line"
      total_failed=$((total_failed + 1))
    fi
  done
  version_jobs=()
  echo "# all versions in $((SECONDS - started)) s"
  echo "$total_passed passed, $total_failed failed"
  [ "$total_failed" -eq 0 ]
  exit
}

# boot_systemd WORKDIR [BINARY...]: boots the systemd of VIGIL_E2E_SYSTEMD (boot-systemd.sh) and
# prints its host pid. On a root other than the host's, the directories outside the system's
# where BINARY's shared libraries are (a debug build's Swift runtime) are bound in read-only.
boot_systemd() {
  local dir=$1 binary library directory runtime=()
  shift
  case ${VIGIL_E2E_SYSTEMD:-252} in
    252) "$vigil_e2e/boot-systemd.sh" "$dir" ;;
    254)
      "$vigil_e2e/fetch-systemd-254.sh" "$VIGIL_E2E_CACHE/systemd-254" >&2 &&
        "$vigil_e2e/boot-systemd.sh" "$dir" "$VIGIL_E2E_CACHE/systemd-254" ;;
    257)
      for directory in $(for binary in "$@"; do ldd "$binary"; done | awk '$3 ~ /^\// { print $3 }' |
        while read -r library; do dirname "$library"; done | sort -u); do
        case $directory in /lib | /lib64 | /usr/lib | /usr/lib64 | /lib/* | /lib64/* | /usr/lib/* | /usr/lib64/*) ;;
          *) runtime+=(--bind "$directory") ;;
        esac
      done
      "$vigil_e2e/fetch-debian-13.sh" "$VIGIL_E2E_CACHE/trixie" >&2 &&
        "$vigil_e2e/boot-systemd.sh" --root "$VIGIL_E2E_CACHE/trixie" "${runtime[@]}" "$dir" ;;
    *) echo "no systemd ${VIGIL_E2E_SYSTEMD} here: 252, 254 or 257" >&2; return 2 ;;
  esac
}

# check_booted_version: the systemd at $pid is the version the check lines name.
check_booted_version() {
  check "systemd ${VIGIL_E2E_SYSTEMD:-252} is running" bash -c "
    nsenter -t $pid -a systemctl --version | head -1 | tee /dev/stderr | grep -q '^systemd ${VIGIL_E2E_SYSTEMD:-252} '"
}

# sandbox_kill SIGNAL PID: kill(1) inside the sandbox, for a PID that names one process. A pid
# read from `systemctl show -P MainPID` is 0 when the unit is not running, and `kill -SIG 0`
# signals the caller's whole process group: the test runner's (a SIGUSR1 killed `swift test`
# so, found with the signal:signal_generate trace event).
sandbox_kill() {
  one_pid "$2" || { echo "not signalling pid '$2': not one process" >&2; return 1; }
  in_sandbox kill "$1" "$2"
}

# one_pid PID: PID names one process (not '', 0, 1, negative or not a number), for a script that
# signals it in a loop of its own (limits.sh).
one_pid() {
  case $1 in '' | 0 | 1 | *[!0-9]*) return 1 ;; esac
}
