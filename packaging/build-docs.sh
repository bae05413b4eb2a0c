#!/usr/bin/env bash
# Builds the DocC documentation of every library module into one .doccarchive, with the
# toolchain's own `docc` (no plugin needed): one landing page per module (its catalog,
# Sources/MODULE/MODULE.docc), a page per public type and member, and the articles in
# Sources/Vigil/Vigil.docc. Fails on any DocC warning: an unresolved ``symbol`` or <doc:article>
# link (in an article or in any public doc comment of any module), an undocumented parameter.
# CI runs it; browse the result with `docc preview` or any static server.
#
# One `docc convert` of all the modules' symbol graphs: each module becomes a root of the same
# archive (documentation/vigil, documentation/vigillifecycle, …), and a link crosses modules by
# its absolute path, ``VigilLifecycle/ListenerGroup``. The catalogs are copied side by side
# into one (docc reads one catalog), each in a folder of its own, so file names may repeat.
#
#   bash packaging/build-docs.sh [OUTPUT]      # default ./Vigil.doccarchive
#   VIGIL_DOCS_IDE=1 bash packaging/build-docs.sh   # one `file:line:column: error:` line per problem
set -euo pipefail
cd "$(dirname "$0")/.."
output=${1:-Vigil.doccarchive}
# The library modules, VigilTesting included (the test kit is public API too).
modules=(
    Vigil VigilLifecycle VigilSystemd VigilPersistence VigilConfiguration VigilPOSIX
    VigilEventLoop VigilEarlySignals VigilSwiftConfiguration VigilTesting
)
work=$(mktemp -d /tmp/vigil-docs.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/graphs" "$work/Vigil.docc"
built=$(swift build --show-bin-path)/../symbolgraph
# No graph left from an earlier run may stand in for one this run could not make. The dump also
# tries the test targets, and fails on them unless `swift test` built them: only the library
# modules' graphs must be there.
rm -f "$built"/*.symbols.json
swift package dump-symbol-graph --minimum-access-level public >"$work/dump.log" 2>&1 || true
for module in "${modules[@]}"; do
    [ -e "$built/$module.symbols.json" ] || {
        cat "$work/dump.log" >&2
        echo "build-docs.sh: no symbol graph for $module (above: swift package dump-symbol-graph)" >&2
        exit 1
    }
    # The module's own symbols, and its extensions of other modules' types (MODULE@OTHER).
    cp "$built/$module.symbols.json" "$work/graphs/"
    for extension in "$built/$module"@*.symbols.json; do
        if [ -e "$extension" ]; then cp "$extension" "$work/graphs/"; fi
    done
    catalog=Sources/$module/$module.docc
    [ -d "$catalog" ] || { echo "build-docs.sh: $catalog is missing: every module needs a landing page" >&2; exit 1; }
    cp -R "$catalog" "$work/Vigil.docc/$module"
done
docc convert "$work/Vigil.docc" \
    --additional-symbol-graph-dir "$work/graphs" \
    --fallback-display-name Vigil --fallback-bundle-identifier org.vigil.Vigil \
    --output-path "$output" --warnings-as-errors --analyze ${VIGIL_DOCS_IDE:+--ide-console-output} 2>&1 |
    # Problems in a catalog are reported where the file lives, not in the copy.
    sed "s|$work/Vigil.docc/\([A-Za-z]*\)/|Sources/\1/\1.docc/|g"
echo "$output"
