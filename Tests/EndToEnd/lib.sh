# Shared by run.sh and package.sh: checks that print one line each, and the teardown of the
# systemd they boot. Source it after setting `work`; set `pid` once systemd runs.
pid=""
passed=0
failed=0

teardown() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
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
    passed=$((passed + 1)); printf 'ok   - %s (%.2fs)\n' "$name" "$(awk "BEGIN { print $EPOCHREALTIME - $started }")"
  else
    failed=$((failed + 1)); echo "FAIL - $name"; printf '%s\n' "$output" | sed 's/^/       /' | tail -n 20
  fi
}

in_sandbox() { nsenter -t "$pid" -a "$@"; }
