#!/usr/bin/env bash
# CI for the example (called by .ci/run): installs SQLite's headers (libsqlite3-dev, for GRDB)
# when missing, builds kv as its own package (it depends on this repository by path) and runs its
# end-to-end test under systemd 252, 254 and 257 at once (257's Debian 13 root has libsqlite3-0
# already: python3 depends on it). Prints the test's closing "N passed, M failed" line; exits
# non-zero if the build or any check failed. Needs root (apt; the end-to-end test boots
# systemd in namespaces) and python3.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! dpkg-query -W -f='${Status}' libsqlite3-dev 2>/dev/null | grep -q 'install ok installed'; then
  echo "# kv: apt-get install libsqlite3-dev"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsqlite3-dev >/dev/null
fi
echo "# kv: swift build --package-path Examples/kv"
if ! swift build --package-path "$here"; then
  echo "FAIL - kv builds"
  echo "0 passed, 1 failed"
  exit 1
fi
bin=$(swift build --package-path "$here" --show-bin-path)
bash "$here/Tests/EndToEnd/run.sh" "$bin/kv"
