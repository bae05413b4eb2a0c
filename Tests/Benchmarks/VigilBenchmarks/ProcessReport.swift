import Vigil
import VigilTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Runs vigild and the C floor alternately and turns the samples into table rows.
struct ProcessReport {
    var options: Options

    func progress(_ text: String) {
        var line = text + "\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    func run() throws -> [Row] {
        let vigil = MeasuredDaemon(name: "vigild", executable: options.vigild, arguments: ["run"])
        let floor = MeasuredDaemon(name: "vigil-floor", executable: options.floor, arguments: ["run"])
        try FileSystem.makeDirectories(options.workDirectory)
        let benchmarks = ProcessBenchmarks(
            workDirectory: options.workDirectory,
            configuration: options.configuration,
            cycles: options.cycles,
            reloadsPerCycle: options.reloads,
            idleSeconds: options.idleSeconds,
            runtimeDirectory: options.runtimeDirectory
        )
        // One warm-up cycle each (page cache, first-run directories), then alternate, swapping
        // the order every round so that neither always runs first.
        _ = try benchmarks.cycle(floor, tag: floor.name)
        _ = try benchmarks.cycle(vigil, tag: vigil.name)
        var samples: [String: [CycleSample]] = [:]
        for round in 0..<options.cycles {
            for daemon in round % 2 == 0 ? [floor, vigil] : [vigil, floor] {
                samples[daemon.name, default: []].append(try benchmarks.cycle(daemon, tag: daemon.name))
            }
            progress("cycle \(round + 1)/\(options.cycles)")
        }
        var idle: [String: [(wakeups: Double, pings: Double, threads: Int)]] = [:]
        for watchdog in [nil, UInt64(1_000_000)] as [UInt64?] {
            for daemon in [floor, vigil] {
                progress("idle \(options.idleSeconds) s: \(daemon.name), watchdog \(watchdog == nil ? "off" : "on")")
                idle[daemon.name, default: []].append(
                    try benchmarks.idle(daemon, tag: daemon.name, watchdogMicroseconds: watchdog)
                )
            }
        }

        let v = samples[vigil.name]!
        let f = samples[floor.name]!
        var rows: [Row] = []
        func timing(_ measure: String, _ p: Double, _ pick: (CycleSample) -> [UInt64], budget: Double?) {
            let vigil = Summary(v.flatMap(pick)).percentile(p)
            let floor = Summary(f.flatMap(pick)).percentile(p)
            rows.append(
                Row(
                    measure: measure,
                    vigil: Format.microseconds(vigil),
                    floor: Format.microseconds(floor),
                    ratio: Format.ratio(vigil, floor),
                    budget: budget.map { "≤ \(Format.fixed($0, 1))× floor" } ?? "",
                    met: budget.map { vigil <= $0 * floor }
                )
            )
        }
        timing("Start: exec → READY=1, p50 (\(v.count) starts)", 50, { [$0.start] }, budget: 1.2)
        timing("Start: exec → READY=1, p99", 99, { [$0.start] }, budget: nil)
        let reloads = v.count * options.reloads
        timing("Reload: SIGHUP → RELOADING=1 → READY=1, p50 (\(reloads) reloads)", 50, { $0.reloads }, budget: 1.5)
        timing("Reload round trip p99", 99, { $0.reloads }, budget: nil)
        timing("Stop: SIGTERM → exit, p50", 50, { [$0.stop] }, budget: 1.5)

        let vigilMemory = Summary(v.map(\.memory.resident)).median
        let floorMemory = Summary(f.map(\.memory.resident)).median
        rows.append(
            Row(
                measure: "RSS after READY=1, median",
                vigil: Format.mebibytes(vigilMemory),
                floor: Format.mebibytes(floorMemory),
                ratio: Format.ratio(vigilMemory, floorMemory),
                budget: "≤ 4.5 MiB",
                met: vigilMemory <= 4.5 * 1024
            )
        )
        for (label, pick) in [("anonymous", \Memory.anonymous), ("file-backed", \Memory.file)]
            as [(String, KeyPath<Memory, Int>)]
        {
            let vigil = Summary(v.map { $0.memory[keyPath: pick] }).median
            let floor = Summary(f.map { $0.memory[keyPath: pick] }).median
            rows.append(
                Row(
                    measure: "… of which \(label)",
                    vigil: Format.mebibytes(vigil),
                    floor: Format.mebibytes(floor),
                    ratio: Format.ratio(vigil, floor),
                    budget: "",
                    met: nil
                )
            )
        }
        let vi = idle[vigil.name]!
        let fi = idle[floor.name]!
        rows.append(
            Row(
                measure:
                    "Idle wake-ups/s, watchdog off (\(options.idleSeconds) s; threads: \(vi[0].threads) vs \(fi[0].threads))",
                vigil: Format.fixed(vi[0].wakeups, 1),
                floor: Format.fixed(fi[0].wakeups, 1),
                ratio: "",
                budget: "0",
                met: vi[0].wakeups < 0.5
            )
        )
        rows.append(
            Row(
                measure:
                    "Idle wake-ups/s, WatchdogSec=1s (pings/s: \(Format.fixed(vi[1].pings, 1)) vs \(Format.fixed(fi[1].pings, 1)))",
                vigil: Format.fixed(vi[1].wakeups, 1),
                floor: Format.fixed(fi[1].wakeups, 1),
                ratio: Format.ratio(vi[1].wakeups, fi[1].wakeups),
                budget: "only the pings: 2/s",
                met: vi[1].wakeups <= 2.5
            )
        )
        let binary = try BinaryFacts(path: options.vigild)
        rows.append(
            Row(
                measure: "vigild binary (static Swift stdlib, stripped)\(binary.foundationNote)",
                vigil: Format.fixed(Double(binary.bytes) / 1_000_000, 1) + " MB",
                floor: Format.fixed(Double(try BinaryFacts(path: options.floor).bytes) / 1_000, 0) + " kB",
                ratio: "",
                budget: "≤ 20 MB, no Foundation or ICU",
                met: binary.bytes <= 20_000_000 && !binary.linksFoundation
            )
        )
        return rows
    }
}

/// Size of a binary and whether Foundation or ICU went into it.
struct BinaryFacts {
    var bytes: Int
    var linksFoundation: Bool

    init(path: String) throws {
        let contents = try FileSystem.read(path, limit: 256 << 20)
        bytes = contents.count
        // Swift symbols and metadata name their module; ICU's data table starts with "icudt".
        linksFoundation = ["$s10Foundation", "FoundationInternationalization", "icudt"].contains { needle in
            contents.contains(subsequence: Array(needle.utf8))
        }
    }

    var foundationNote: String { linksFoundation ? "; **links Foundation or ICU**" : "; no full Foundation, no ICU" }
}

extension Array where Element == UInt8 {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= count else { return false }
        var index = 0
        while let found = self[index...].firstIndex(of: first) {
            if found + needle.count > count { return false }
            if self[found..<found + needle.count].elementsEqual(needle) { return true }
            index = found + 1
        }
        return false
    }
}
