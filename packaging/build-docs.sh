#!/usr/bin/env bash
# Builds the DocC documentation of the Vigil module (Sources/Vigil/Vigil.docc: the articles and
# every public symbol's doc comment) into a .doccarchive, with the toolchain's own `docc` (no
# plugin needed). Fails on any DocC warning: an unresolved ``symbol`` or <doc:article> link, an
# undocumented parameter. CI runs it; browse the result with `docc preview` or any static server.
#
#   bash packaging/build-docs.sh [OUTPUT]      # default ./Vigil.doccarchive
set -euo pipefail
cd "$(dirname "$0")/.."
output=${1:-Vigil.doccarchive}
swift package dump-symbol-graph --minimum-access-level public >/dev/null
graphs=$(mktemp -d /tmp/vigil-symbolgraph.XXXXXX)
trap 'rm -rf "$graphs"' EXIT
built=$(swift build --show-bin-path)/../symbolgraph
# Vigil's own symbols and its extensions of other modules' types.
cp "$built"/Vigil.symbols.json "$graphs"/
# Vigil's public extensions of other modules' types, if it has any (it has none since the
# conformances moved to where they are implemented).
for extension in "$built"/Vigil@*.symbols.json; do [[ -e $extension ]] && cp "$extension" "$graphs"/; done
docc convert Sources/Vigil/Vigil.docc \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name Vigil --fallback-bundle-identifier org.vigil.Vigil \
    --output-path "$output" --warnings-as-errors --analyze
echo "$output"
