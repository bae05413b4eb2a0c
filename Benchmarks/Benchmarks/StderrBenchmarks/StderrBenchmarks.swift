import Benchmark
import BenchmarkSupport
import Logging
import Synchronization
import Vigil

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The stderr fallback of Vigil's logging (issue 12's target: ≥ 1 M lines/s, ≤ 1000 ns per line),
// in a process of its own: swift-log is bootstrapped once per process, and VigilBenchmarks'
// process writes to the journal. Here `Daemon.bootstrapLogging` sees a daemon under systemd
// whose stderr is not the journal, and picks `<N>`-prefixed lines on stderr.

/// Per-line time of the stderr fallback: ≥ 1 M lines/s is ≤ 1000 ns per line.
let nanosecondsPerLine = BenchmarkMetric.custom("ns per line", polarity: .prefersSmaller, useScalingFactor: false)

/// A target is met at p90 when the result is at most the value in Thresholds/: no tolerance.
var atTarget: BenchmarkThresholds { BenchmarkThresholds(absolute: [.p90: 0]) }

/// swift-log bootstrapped once for this process as a daemon that systemd started without
/// connecting stderr to the journal (`SYSTEMD_EXEC_PID` naming this process, no
/// `JOURNAL_STREAM`): every logger writes `<N>`-prefixed lines to stderr.
let fallbackLogging: DaemonLogging = {
    let saved = getenv("JOURNAL_STREAM").map { String(cString: $0) }
    unsetenv("JOURNAL_STREAM")
    setenv("SYSTEMD_EXEC_PID", "\(getpid())", 1)
    defer {
        unsetenv("SYSTEMD_EXEC_PID")
        if let saved { setenv("JOURNAL_STREAM", saved, 1) }
    }
    return Daemon.bootstrapLogging(identifier: "vigild", level: .info)
}()

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        warmupIterations: 10,
        maxDuration: .seconds(2),
        maxIterations: 20_000
    )

    // The stderr fallback (`<N>` lines) into /dev/null: lines per second.
    let stderrFixture = StderrFixture()
    Benchmark(
        "stderr fallback",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, nanosecondsPerLine],
            scalingFactor: .kilo,
            maxIterations: 200,
            thresholds: [nanosecondsPerLine: atTarget],
            setup: { stderrFixture.start() },
            teardown: { stderrFixture.stop() }
        )
    ) { benchmark in
        let began = Monotonic.now()
        for _ in benchmark.scaledIterations { stderrFixture.handlerCall() }
        benchmark.measurement(nanosecondsPerLine, Int(Monotonic.now() - began) / benchmark.scaledIterations.count)
    }
    Benchmark(
        "stderr raw write of the finished line",
        configuration: .init(
            metrics: [.wallClock, .throughput],
            scalingFactor: .kilo,
            maxIterations: 200,
            setup: { stderrFixture.start() },
            teardown: { stderrFixture.stop() }
        )
    ) { benchmark in
        for _ in benchmark.scaledIterations { stderrFixture.rawCall() }
    }
}

/// The stderr fallback (`<N>` lines, through `fallbackLogging`) and one write(2) of the
/// finished line, into /dev/null.
final class StderrFixture: Sendable {
    private let saved = Atomic<Int32>(-1)
    /// Made after swift-log is bootstrapped (a logger keeps the handler it was made with).
    private let logger: Logger = {
        _ = fallbackLogging
        return Logger(label: "bench")
    }()
    private let line = Array(
        "<5>Reload applied: configuration generation 2 is now in force MESSAGE_ID=7dd32b12fecb4f54b882f1a4b4061f72 VIGIL_GENERATION=2\n"
            .utf8
    )

    /// Points descriptor 2 at /dev/null (package-benchmark reports on stdout).
    func start() {
        let null = open("/dev/null", O_WRONLY)
        saved.store(dup(2), ordering: .relaxed)
        dup2(null, 2)
        close(null)
    }

    func stop() {
        let saved = saved.exchange(-1, ordering: .relaxed)
        guard saved >= 0 else { return }
        dup2(saved, 2)
        close(saved)
    }

    func handlerCall() {
        logger.notice(
            "Reload applied: configuration generation 2 is now in force",
            metadata: ["MESSAGE_ID": "7dd32b12fecb4f54b882f1a4b4061f72", "VIGIL_GENERATION": "2"]
        )
    }

    func rawCall() {
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}
