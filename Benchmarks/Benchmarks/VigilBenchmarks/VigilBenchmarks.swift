import Benchmark
import BenchmarkSupport
import CVigilSystemd
import Logging
import Vigil
import VigilLifecycle
import VigilSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Vigil's in-process budgets (issue 12) on ordo-one/package-benchmark. Allocations are counted
// by the package's malloc interposer (`mallocCountTotal`); a target is a threshold in code and a
// static threshold in Thresholds/ (the target itself, checked at p90 with no tolerance), so
// `swift package benchmark thresholds check` exits 2 when one is missed (4 when all are better
// than their targets, 0 when exactly at them). A ratio to a raw libsystemd call is measured in one benchmark, the two
// calls interleaved, and reported as the custom metric `… % of raw` (100 = as fast as raw).
//
// | benchmark | target |
// | --- | --- |
// | Fan-out to 100 listeners | ≤ 200 ns and ≤ 1 allocation per delivery (≤ 20 µs, ≤ 100 per event) |
// | Journal handler vs raw sd_journal_sendv | ≤ 1.2× raw (≤ 120 %) |
// | stderr fallback (StderrBenchmarks) | ≥ 1 M lines/s (≤ 1000 ns per line) |
// | Notifier vs raw sd_notify | ≤ 1.1× raw (≤ 110 %) |
//
// The journal and notify sockets are drains this process binds; the journal's is at
// /run/systemd/journal/socket, which Benchmarks/in-process.sh puts in a private mount namespace
// with a tmpfs on /run so that journald (if any) never sees the entries.

/// `… % of raw`: the handler's time as a percentage of the raw C call's.
let percentOfRaw = BenchmarkMetric.custom("% of raw (100 = raw)", polarity: .prefersSmaller, useScalingFactor: false)

/// Per-delivery figures of the fan-out benchmarks (the framework's are per event).
let nanosecondsPerDelivery = BenchmarkMetric.custom(
    "ns per delivery",
    polarity: .prefersSmaller,
    useScalingFactor: false
)

/// A target is met at p90 when the result is at most the value in Thresholds/: no tolerance.
var atTarget: BenchmarkThresholds { BenchmarkThresholds(absolute: [.p90: 0]) }

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        warmupIterations: 10,
        maxDuration: .seconds(2),
        maxIterations: 20_000
    )

    // One SIGUSR1-style event through a running Daemon's mediator to every listener and back to
    // the caller (the observer's `.userSignal` record), asked for through a listener's context.
    // On the default executor: package-benchmark owns `main`, so EventLoopExecutor (vigild's
    // executor) cannot be installed here.
    for listeners in [1, 10, 100] {
        let fixture = FanOutFixture(listeners: listeners)
        let target: [BenchmarkMetric: BenchmarkThresholds]? =
            listeners == 100
            ? [.mallocCountTotal: atTarget, nanosecondsPerDelivery: atTarget] : nil
        Benchmark(
            "Fan-out to \(listeners) listener\(listeners == 1 ? "" : "s")",
            configuration: .init(
                metrics: [.wallClock, .mallocCountTotal, nanosecondsPerDelivery],
                thresholds: target,
                setup: { try await fixture.start() },
                teardown: { try await fixture.stop() }
            )
        ) { benchmark async in
            let began = Monotonic.now()
            for _ in benchmark.scaledIterations {
                await fixture.event()
            }
            let elapsed = Monotonic.now() - began
            benchmark.measurement(nanosecondsPerDelivery, Int(elapsed) / (benchmark.scaledIterations.count * listeners))
        }
    }

    // SIGHUP's work without the signal: two-phase reload through 10 listeners, one of which
    // reads, parses, decodes and validates a configuration file. No target.
    let reload = ReloadFixture()
    Benchmark(
        "In-process reload, 10 listeners",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal],
            setup: { try await reload.start() },
            teardown: { try await reload.stop() }
        )
    ) { benchmark async in
        for _ in benchmark.scaledIterations {
            await reload.reload()
        }
    }

    // The journal handler and sd_journal_sendv with the same 11 fields, interleaved.
    let journal = JournalFixture()
    ratioToRaw(
        "Journal handler vs raw sd_journal_sendv",
        maxIterations: 200,
        start: journal.start,
        stop: journal.stop,
        vigil: journal.handlerCall,
        raw: journal.rawCall
    )
    Benchmark(
        "Journal handler alone",
        configuration: .init(
            scalingFactor: .kilo,
            maxIterations: 200,
            setup: { try journal.start() },
            teardown: { try journal.stop() }
        )
    ) { benchmark in
        for _ in benchmark.scaledIterations { _ = journal.handlerCall() }
    }

    // The stderr fallback is measured in StderrBenchmarks: this process's swift-log writes to
    // the journal, and swift-log is bootstrapped once per process.

    // READY=1 with STATUS= through SystemdNotifier and through sd_notify, interleaved.
    let notify = NotifyFixture()
    ratioToRaw(
        "Notifier vs raw sd_notify",
        maxIterations: 100,
        start: notify.start,
        stop: notify.stop,
        vigil: notify.notifierCall,
        raw: notify.rawCall
    )
}

/// A benchmark of Vigil's call against the raw libsystemd call, interleaved 1000 times per
/// iteration, reporting Vigil's time as `% of raw` (its target is in Thresholds/).
func ratioToRaw(
    _ name: String,
    maxIterations: Int,
    start: @escaping @Sendable () throws -> Void,
    stop: @escaping @Sendable () throws -> Void,
    vigil: @escaping @Sendable () -> UInt64,
    raw: @escaping @Sendable () -> UInt64
) {
    Benchmark(
        name,
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, percentOfRaw],
            scalingFactor: .kilo,
            maxIterations: maxIterations,
            thresholds: [percentOfRaw: atTarget],
            setup: { try start() },
            teardown: { try stop() }
        )
    ) { benchmark in
        var vigilTotal: UInt64 = 0
        var rawTotal: UInt64 = 0
        // The two calls take turns going first. Against a drain socket the first call of a pair
        // is the one that wakes the drain's thread (and finds its queue empty), the second comes
        // while it is still awake: always calling Vigil's first charged every wake-up to Vigil.
        for iteration in benchmark.scaledIterations {
            if iteration & 1 == 0 {
                vigilTotal += vigil()
                rawTotal += raw()
            } else {
                rawTotal += raw()
                vigilTotal += vigil()
            }
        }
        benchmark.measurement(percentOfRaw, Int(vigilTotal * 100 / max(rawTotal, 1)))
    }
}
