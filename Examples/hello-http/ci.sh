#!/usr/bin/env bash
# CI for the example (called by .ci/run): builds hello-http as its own package (it depends on
# this repository by path) and runs its end-to-end test under systemd 252, 254 and 257. Prints the
# test's closing "N passed, M failed" line; exits non-zero if the build or any check failed.
# Needs root (the end-to-end test boots systemd in namespaces) and python3.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
echo "# hello-http: swift build --package-path Examples/hello-http"
if ! swift build --package-path "$here"; then
  echo "FAIL - hello-http builds"
  echo "0 passed, 1 failed"
  exit 1
fi
bin=$(swift build --package-path "$here" --show-bin-path)
bash "$here/Tests/EndToEnd/run.sh" "$bin/hello-http"
