#!/usr/bin/env bash
# Coverage-guided fuzzing (issue 10, "Prove it"): builds vigil-fuzz with libFuzzer
# (`swiftc -sanitize=fuzzer`) into .build-fuzz and runs each target for SECONDS:
#   JSONParser     bytes → JSONParser.parse (and a round trip through JSONWriter)
#   Configuration  bytes → ConfigurationLoader<VigildConfiguration>().decode (parse, decode, validate)
#   StateFile      bytes → the state file's heartbeat, as vigild restores it
# Each starts from its committed seed corpus (Tests/Fuzz/<target>/corpus, never written to: new
# inputs go to .build-fuzz/corpus/<target>). Exits non-zero when any target crashes, traps, hangs
# (-timeout) or leaks memory past -rss_limit_mb; the input is saved as
# .build-fuzz/artifacts/<target>-crash-…, replay it with
#   swift build --product vigil-fuzz && VIGIL_FUZZ_TARGET=<target> .build/debug/vigil-fuzz FILE
#
# Usage: Tests/Fuzz/run.sh [SECONDS [TARGET…]]   (default: 60 s for each of the three targets)
# VIGIL_FUZZ_SANITIZERS=fuzzer,address adds AddressSanitizer (a slower build and run, into
# .build-fuzz-fuzzer-address).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
case $seconds in '' | *[!0-9]*) echo "usage: $0 [SECONDS [TARGET…]]" >&2; exit 2 ;; esac
shift $(($# > 0 ? 1 : 0))
if [ $# -gt 0 ]; then targets=("$@"); else targets=(JSONParser Configuration StateFile); fi
sanitizers=${VIGIL_FUZZ_SANITIZERS:-fuzzer}
# Other sanitizers build elsewhere, so that switching does not rebuild the default build.
scratch=.build-fuzz
[ "$sanitizers" = fuzzer ] || scratch=.build-fuzz-${sanitizers//,/-}

# -D FUZZING: Driver/FuzzDriver.swift runs libFuzzer's driver instead of replaying files.
# Release: bounds and overflow checks stay on (-O, not -Ounchecked); throughput is ~10x debug's.
swift build -c release --product vigil-fuzz --scratch-path "$scratch" \
    -Xswiftc -sanitize="$sanitizers" -Xswiftc -DFUZZING
binary=$(swift build -c release --product vigil-fuzz --scratch-path "$scratch" --show-bin-path \
    -Xswiftc -sanitize="$sanitizers" -Xswiftc -DFUZZING)/vigil-fuzz

failed=0
summary=()
for target in "${targets[@]}"; do
    # Inputs up to 8 KiB: room for nesting past the depth limit and for long lines and keys.
    max_len=8192
    work=$scratch/corpus/$target
    mkdir -p "$work" "$scratch/artifacts"
    log=$scratch/$target.log
    status=0
    # Swift's backtracer would take a trap's signal before libFuzzer saves the input: off.
    SWIFT_BACKTRACE=enable=no VIGIL_FUZZ_TARGET=$target "$binary" "$work" "Tests/Fuzz/$target/corpus" \
        -dict=Tests/Fuzz/json.dict -max_len=$max_len -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$scratch/artifacts/$target-" \
        >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    features=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    if [ "$status" -eq 0 ]; then
        outcome=ok
    else
        outcome="FAILED (exit $status; see $log)"
        failed=1
        grep -E 'ERROR|Fatal error|SUMMARY|Test unit written|Base64' "$log" >&2 || tail -n 20 "$log" >&2
    fi
    summary+=("fuzz $target: ${runs:-?} executions in ${seconds} s, coverage ${coverage:-?} edges, ${features:-?} features, corpus ${corpus:-?}: $outcome")
done
printf '%s\n' "${summary[@]}"
exit $failed
