#!/usr/bin/env bash
# Builds vigild as the .deb ships it and prints the executable's path: release, the Swift standard
# library static, a static executable; its release link lays out the functions a running vigild
# executes side by side (packaging/vigild.order, gold's --section-ordering-file in Package.swift).
# The one build command of build-deb.sh, order-file.sh and Benchmarks/run.sh, so the benchmarks
# measure what the package ships.
#
# Why static: no dynamic loader runs before the executable's preinit array blocks the daemon's
# signals (the VigilEarlySignals product), so only the kernel's execve is left in which an early
# signal is fatal (issue 10, item 17); start-up maps and relocates no shared objects (issue 12).
# Not static-pie: linked with lld it builds, but glibc's _dl_relocate_static_pie asserts at start
# with the Swift runtime in it (the executable's image is therefore not randomised; heap, stack
# and mmap still are). Vigil links no libsystemd; getaddrinfo is only used with AI_NUMERICHOST
# (no NSS).
set -euo pipefail
project=$(cd "$(dirname "$0")/.." && pwd)
# Its own scratch path: flags differ from a plain `swift build -c release`.
scratch=$project/.build-static
# -function-sections (a frontend flag: SwiftPM's incremental build trips over the driver's
# spelling) puts every Swift function of Vigil and its packages in a section of its own, so the
# order file can move each of them, as it moves the standard library's (issue 12: RSS 6.2 → 5.2
# MiB of file-backed pages). The link map (vigild.map in the scratch path) tells order-file.sh
# which input section holds each function.
#
# -disable-concrete-type-metadata-mangled-name-accessors: the compiler otherwise reaches the
# metadata of a generic type such as PersistenceListener<VigildConfiguration> through its mangled
# name, and the runtime demangles it and checks each generic requirement by scanning every
# protocol conformance record of the binary (about 2,600 in vigild), once per type the first time
# it is used. With the flag it calls the type's metadata accessor with the witness tables in
# hand. Measured under callgrind, start + 3 reloads + stop: 6.2 M → 3.9 M instructions, 24 KB of
# code (README "Performance"). A daemon built on Vigil gets the same by passing the same flag.
swift build --package-path "$project" -c release --static-swift-stdlib \
  -Xswiftc -static-executable -Xswiftc -Xfrontend -Xswiftc -function-sections \
  -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors \
  -Xlinker -Map="$scratch/vigild.map" --product vigild --scratch-path "$scratch" >&2
binary=$scratch/release/vigild
if readelf -d "$binary" 2>/dev/null | grep -q '(NEEDED)'; then
  echo "$binary still needs shared libraries:" >&2
  readelf -d "$binary" | grep '(NEEDED)' >&2
  exit 1
fi
echo "$binary"
