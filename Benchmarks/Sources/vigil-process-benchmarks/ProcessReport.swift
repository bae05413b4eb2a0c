import BenchmarkSupport
import VigilTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One row of the Markdown table: a figure per daemon, vigild's and the Go peer's ratio to the
/// C floor, the target and whether vigild meets it, and whether vigild lies between the language
/// floor and the Go peer.
struct Row {
    var measure: String
    var figures: [String]
    var vigilRatio = ""
    var peerRatio = ""
    var target = ""
    var met: Bool?
    var between: Bool?

    static let columns = ["vigild", "C floor", "Go peer", "Swift hello"]

    static var header: String {
        "| Measure | " + columns.joined(separator: " | ")
            + " | vigild ÷ C | Go ÷ C | Target | Met | hello ≤ vigild ≤ Go |\n"
            + "| --- |" + String(repeating: " ---: |", count: columns.count + 2) + " --- | :---: | :---: |"
    }

    var line: String {
        func verdict(_ value: Bool?) -> String { value.map { $0 ? "yes" : "**no**" } ?? "" }
        return "| \(measure) | " + figures.joined(separator: " | ")
            + " | \(vigilRatio) | \(peerRatio) | \(target) | \(verdict(met)) | \(verdict(between)) |"
    }
}

/// Runs vigild, the C floor, the Go peer and the Swift hello-world alternately and turns the
/// samples into the table.
struct ProcessReport {
    var options: Options

    func progress(_ text: String) {
        var line = text + "\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// The configuration as it is, and the same with one more space before its closing brace:
    /// both valid, different bytes, the same length give or take one.
    static func configurationVersions(_ path: String) throws -> [String] {
        guard let text = TextFile.read(path), let brace = text.lastIndex(of: "}") else {
            throw BenchmarkError("cannot read the configuration \(path), or it is not a JSON object")
        }
        var edited = text
        edited.insert(" ", at: brace)
        return [text, edited]
    }

    func run() throws -> String {
        // In the table's column order.
        let daemons = [
            MeasuredDaemon(name: "vigild", executable: options.daemons["vigild", default: ""], arguments: ["run"]),
            MeasuredDaemon(name: "vigil-floor", executable: options.daemons["floor", default: ""], arguments: ["run"]),
            MeasuredDaemon(
                name: "vigil-go-peer",
                executable: options.daemons["go-peer", default: ""],
                arguments: ["run"]
            ),
            MeasuredDaemon(
                name: "vigil-swift-hello",
                executable: options.daemons["swift-hello", default: ""],
                arguments: [],
                sameWork: false
            ),
        ]
        guard mkdir(options.workDirectory, 0o700) == 0 || errno == EEXIST else {
            throw BenchmarkError("cannot create the work directory \(options.workDirectory): errno \(errno)")
        }
        let benchmarks = ProcessBenchmarks(
            workDirectory: options.workDirectory,
            configuration: options.configuration,
            cycles: options.cycles,
            reloadsPerCycle: options.reloads,
            reloadGapNanoseconds: UInt64(options.reloadGapMilliseconds) * 1_000_000,
            readerWorkNanoseconds: UInt64(options.readerWorkMicroseconds) * 1_000,
            idleSeconds: options.idleSeconds,
            runtimeDirectory: options.runtimeDirectory,
            configurationVersions: try Self.configurationVersions(options.configuration)
        )
        // One warm-up cycle each (page cache, first-run directories), then alternate, rotating
        // the order every round so that none always runs first.
        for daemon in daemons { _ = try benchmarks.cycle(daemon, tag: daemon.name) }
        var samples = Array(repeating: [CycleSample](), count: daemons.count)
        for round in 0..<options.cycles {
            for offset in 0..<daemons.count {
                let index = (round + offset) % daemons.count
                samples[index].append(try benchmarks.cycle(daemons[index], tag: daemons[index].name))
            }
            progress("cycle \(round + 1)/\(options.cycles)")
        }
        var idle = Array(repeating: [(wakeups: Double, pings: Double, threads: Int)](), count: daemons.count)
        for watchdog in [nil, UInt64(1_000_000)] as [UInt64?] {
            for (index, daemon) in daemons.enumerated() {
                progress("idle \(options.idleSeconds) s: \(daemon.name), watchdog \(watchdog == nil ? "off" : "on")")
                idle[index].append(try benchmarks.idle(daemon, tag: daemon.name, watchdogMicroseconds: watchdog))
            }
        }

        var rows: [Row] = []
        /// A row of `values` (one per daemon, vigild first, the C floor second, the Go peer
        /// third, the hello-world fourth); `limit` is vigild's target.
        func row(
            _ measure: String,
            _ values: [Double],
            format: (Double) -> String,
            ratios: Bool = true,
            target: String = "",
            met: Bool? = nil,
            between: Bool = true
        ) {
            rows.append(
                Row(
                    measure: measure,
                    figures: values.map(format),
                    vigilRatio: ratios ? Format.ratio(values[0], values[1]) : "",
                    peerRatio: ratios ? Format.ratio(values[2], values[1]) : "",
                    target: target,
                    met: met,
                    between: between ? values[3] <= values[0] && values[0] <= values[2] : nil
                )
            )
        }
        /// `budget`: vigild's target as a multiple of the C floor; `aheadOfGo`: and no worse than
        /// the Go peer's ratio in the same run (issue 25's goal).
        func timing(
            _ measure: String,
            _ p: Double,
            _ pick: (CycleSample) -> [UInt64],
            budget: Double?,
            aheadOfGo: Bool = false
        ) {
            let values = samples.map { Summary($0.flatMap(pick)).percentile(p) }
            row(
                measure,
                values,
                format: Format.microseconds,
                target: budget.map { "≤ \(Format.fixed($0, 1))× C" + (aheadOfGo ? ", ≤ Go" : "") } ?? "",
                met: budget.map { values[0] <= $0 * values[1] && (!aheadOfGo || values[0] <= values[2]) }
            )
        }
        let cycles = samples[0].count
        timing("Start: exec → READY=1, p50 (\(cycles) starts each)", 50, { [$0.start] }, budget: 1.3, aheadOfGo: true)
        timing("Start: exec → READY=1, p99", 99, { [$0.start] }, budget: nil)
        timing(
            "Reload: SIGHUP → RELOADING=1 → READY=1 (kernel stamp), p50 (\(cycles * options.reloads) reloads each, "
                + "\(options.reloadGapMilliseconds) ms apart; reader \(options.readerWorkMicroseconds) µs per datagram)",
            50,
            { $0.reloads },
            budget: 1.3,
            aheadOfGo: true
        )
        timing("Reload round trip p99", 99, { $0.reloads }, budget: 1.5)
        timing(
            "Reload round trip to the harness's wake-up on READY=1 (systemd's view), p50",
            50,
            { $0.reloadsSeen },
            budget: nil
        )
        timing(
            "Reload of an edited file (rewritten before each SIGHUP), p50",
            50,
            { $0.editedReloads },
            budget: 1.5
        )
        timing(
            "Stop: SIGTERM → exit (durable checkpoint, two fsyncs), p50",
            50,
            { [$0.stop] },
            budget: 1.3,
            aheadOfGo: true
        )

        let resident = samples.map { Summary($0.map(\.memory.resident)).median }
        row(
            "RSS after READY=1, median",
            resident,
            format: Format.mebibytes,
            target: "≤ 5.5 MiB",
            met: Double(resident[0]) <= 5.5 * 1024
        )
        for (label, pick) in [("anonymous", \Memory.anonymous), ("file-backed", \Memory.file)]
            as [(String, KeyPath<Memory, Int>)]
        {
            row(
                "… of which \(label)",
                samples.map { Summary($0.map { $0.memory[keyPath: pick] }).median },
                format: Format.mebibytes
            )
        }
        let threads = idle.map { "\($0[0].threads)" }.joined(separator: "/")
        let quiet = idle.map { $0[0].wakeups }
        row(
            "Idle wake-ups/s, watchdog off (\(options.idleSeconds) s; threads \(threads))",
            quiet,
            format: { Format.fixed($0, 1) },
            ratios: false,
            target: "0",
            met: quiet[0] < 0.5,
            between: false
        )
        let pings = idle.map { Format.fixed($0[1].pings, 1) }.joined(separator: "/")
        let watched = idle.map { $0[1].wakeups }
        row(
            "Idle wake-ups/s, WatchdogSec=1s (pings/s \(pings))",
            watched,
            format: { Format.fixed($0, 1) },
            ratios: false,
            target: "only the pings: 2/s",
            met: watched[0] <= 2.5,
            between: false
        )
        let binaries = try daemons.map { try BinaryFacts(path: $0.executable) }
        row(
            "Binary, stripped\(binaries[0].foundationNote)",
            binaries.map { Double($0.bytes) },
            format: { $0 < 1_000_000 ? Format.fixed($0 / 1_000, 0) + " kB" : Format.fixed($0 / 1_000_000, 1) + " MB" },
            ratios: false,
            target: "≤ 20 MB, no Foundation or ICU",
            met: binaries[0].bytes <= 20_000_000 && !binaries[0].linksFoundation,
            between: false
        )
        var table = Row.header
        for row in rows { table += "\n" + row.line }
        let met = rows.compactMap(\.met)
        let between = rows.compactMap(\.between)
        table +=
            "\n\n\(met.filter { $0 }.count) of \(met.count) targets met; vigild between the language floor and the Go "
        table +=
            "peer in \(between.filter { $0 }.count) of \(between.count) rows. The Swift hello-world does less than the "
        table += "others (no configuration, state or checkpoint), so it gets no ratio."
        return table
    }
}

/// Size of a binary and whether Foundation or ICU went into it.
struct BinaryFacts {
    var bytes: Int
    var linksFoundation: Bool

    init(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchmarkError("cannot open \(path): errno \(errno)") }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            contents += chunk[..<count]
        }
        bytes = contents.count
        // Swift symbols and metadata name their module; ICU's data table starts with "icudt".
        linksFoundation = ["$s10Foundation", "FoundationInternationalization", "icudt"].contains { needle in
            contents.contains(subsequence: Array(needle.utf8))
        }
    }

    var foundationNote: String {
        linksFoundation ? " (vigild **links Foundation or ICU**)" : " (vigild: no full Foundation, no ICU)"
    }
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
