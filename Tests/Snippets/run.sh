#!/usr/bin/env bash
# Docs that compile as written (issue 23 #6): every ```swift block of README.md and of the DocC
# articles (Sources/Vigil/Vigil.docc/*.md) that begins with `import` is written, exactly as the
# document shows it, as Sources/<name>/main.swift of a fresh package that depends on this
# repository the way README's "Add Vigil to your package" says (its `.package(name: "vigil",
# path: …)` line with this checkout's path, and the products the snippet imports). One package,
# one executable target per snippet, one build: the library is compiled once.
#
#   bash Tests/Snippets/run.sh [WORK_DIR]     (the package is left in WORK_DIR; default: a temp dir)
#
# VIGIL_SNIPPETS_SCRATCH=DIR reuses a scratch path (--scratch-path) between runs. Prints one line
# per snippet and the closing "N passed, M failed"; exits non-zero when the build fails.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
if [[ -n ${1:-} ]]; then
  work=$1
else
  work=$(mktemp -d /tmp/vigil-snippets.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
scratch=${VIGIL_SNIPPETS_SCRATCH:-$work/.build}
mkdir -p "$work/Sources"

# The dependency line exactly as README shows it, pointed at this checkout.
package_line=$(grep -o '\.package(name: "vigil", path: "[^"]*")' "$repo/README.md" | head -n 1)
product_line=$(grep -o '\.product(name: "Vigil", package: "vigil")' "$repo/README.md" | head -n 1)
if [[ -z $package_line || -z $product_line ]]; then
  echo "FAIL - README.md shows the .package(name: \"vigil\", path: …) and .product(name: \"Vigil\", …) lines"
  echo "0 passed, 1 failed"
  exit 1
fi
package_line=$(sed "s|path: \"[^\"]*\"|path: \"$repo\"|" <<<"$package_line")

# Extract: name<TAB>document:line for each block whose first line is an import.
index=$work/snippets.tsv
: >"$index"
for document in "$repo/README.md" "$repo"/Sources/Vigil/Vigil.docc/*.md; do
  stem=$(basename "$document" .md | tr -c 'A-Za-z0-9\n' '_')
  awk -v stem="$stem" -v work="$work" -v doc="${document#"$repo"/}" -v index_file="$index" '
    /^```swift[[:space:]]*$/ && !inside { inside = 1; first = 1; start = NR + 1; next }
    /^```/ && inside {
      inside = 0
      if (keep) { close(file); printf "%s\t%s:%d\n", name, doc, start >> index_file }
      keep = 0; next
    }
    inside && first {
      first = 0
      if ($0 ~ /^import /) {
        count++; keep = 1; name = "snippet_" stem "_" count
        system("mkdir -p \"" work "/Sources/" name "\"")
        file = work "/Sources/" name "/main.swift"
        printf "" > file
      }
    }
    inside && keep { print > file }
  ' "$document"
done
if [[ ! -s $index ]]; then
  echo "FAIL - found no snippet beginning with import"
  echo "0 passed, 1 failed"
  exit 1
fi

# The products each snippet imports (a Vigil module is a product of the same name).
targets=""
while IFS=$'\t' read -r name where; do
  products=""
  while read -r module; do
    case $module in
      Vigil | Vigil*) products+=".product(name: \"$module\", package: \"vigil\"), " ;;
      Hummingbird) products+=".product(name: \"Hummingbird\", package: \"hummingbird\"), " ;;
      NIOCore | NIOPosix) products+=".product(name: \"$module\", package: \"swift-nio\"), " ;;
      Glibc | Musl | Foundation | FoundationEssentials | Synchronization | _Concurrency) ;;
      *)
        echo "FAIL - $where imports $module, which this test cannot provide (add it to Tests/Snippets/run.sh)"
        echo "0 passed, 1 failed"
        exit 1
        ;;
    esac
  done < <(sed -n 's/^import \([A-Za-z_]*\).*/\1/p' "$work/Sources/$name/main.swift")
  products=${products/.product(name: \"Vigil\", package: \"vigil\")/$product_line}
  targets+="        .executableTarget(name: \"$name\", dependencies: [${products%, }]),"$'\n'
done <"$index"

cat >"$work/Package.swift" <<MANIFEST
// swift-tools-version:6.1
// Written by Tests/Snippets/run.sh: one executable per documentation snippet.
import PackageDescription

let package = Package(
    name: "snippets",
    dependencies: [
        $package_line,
        // For the articles that show Hummingbird and SwiftNIO (the versions Examples/hello-http uses).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
    ],
    targets: [
$targets    ]
)
MANIFEST

echo "# snippets: $(wc -l <"$index") in $work (scratch path $scratch)"
started=$SECONDS
set +e
swift build --package-path "$work" --scratch-path "$scratch" >"$work/build.log" 2>&1
status=$?
set -e
grep -E 'error:|main.swift:[0-9]+:[0-9]+: warning:' "$work/build.log" || true
passed=0 failed=0
while IFS=$'\t' read -r name where; do
  if grep -q "Sources/$name/main.swift:[0-9]*:[0-9]*: error:" "$work/build.log" \
    || { [[ $status -ne 0 ]] && ! grep -q "error:" "$work/build.log"; }; then
    echo "FAIL - $where compiles as the main.swift of a package ($name)"
    failed=$((failed + 1))
  else
    echo "ok - $where compiles as the main.swift of a package ($name)"
    passed=$((passed + 1))
  fi
done <"$index"
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  echo "FAIL - the snippet package builds (see $work/build.log)"
  failed=$((failed + 1))
fi
echo "# snippets: build took $((SECONDS - started)) s"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
