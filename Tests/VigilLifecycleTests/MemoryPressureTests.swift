import Logging
import ServiceLifecycle
import Testing
import VigilLifecycle
import VigilTesting

/// Memory pressure as a lifecycle event: every listener hears it, in start order, within its
/// budget; reports closer together than the interval are dropped and counted.
@Suite struct MemoryPressureTests {
    /// A group with no signals of its own, running in a child task until `body` returns.
    static func withGroup(
        _ listeners: [any Listener],
        interval: Duration,
        clock: TestClock? = nil,
        _ body: (ListenerGroup, RecordingObserver) async throws -> Void
    ) async throws {
        let observer = RecordingObserver()
        let notifier = RecordingNotifier()
        var configuration = ListenerGroup.Configuration(
            logger: Logger(label: "test"),
            signals: SignalMap(),
            observers: [observer]
        )
        configuration.notifier = notifier
        configuration.memoryPressureInterval = interval
        if let clock { configuration.clock = clock.loopClock }
        let group = try ListenerGroup(listeners: listeners, configuration: configuration)
        let running = Task { try await group.run() }
        try await notifier.waitForReady()
        try await body(group, observer)
        group.requestTermination(.requested("test"))
        try await running.value
    }

    @Test func everyListenerHearsItInStartOrderAndAFailureIsIsolated() async throws {
        let log = AsyncRecorder<String>()
        let listeners = [
            RecordingListener("cache", dependencies: ["store"], log: log),
            RecordingListener("store", log: log, behaviors: ["memoryPressure": .fail("busy")]),
        ]
        try await Self.withGroup(listeners, interval: .seconds(1)) { group, observer in
            group.requestMemoryPressure()
            try await observer.kinds.wait { $0.contains(.memoryPressure(skipped: 0)) }
            #expect(
                observer.kinds.values.contains(
                    .listenerFailed(listener: "store", event: "memory pressure", reason: "busy")
                ),
                "\(observer.kinds.values)"
            )
        }
        #expect(
            log.values.filter { $0.hasSuffix(".memoryPressure") } == ["store.memoryPressure", "cache.memoryPressure"]
        )
    }

    /// Issue 23: a long-running part hears memory pressure through its `ServiceListener`, with
    /// no second listener (before, `ServiceListener` had no such hook and a job daemon added a
    /// listener only to drop its cache).
    @Test func aServiceListenersPartHearsMemoryPressure() async throws {
        let log = AsyncRecorder<String>()
        let part = ServiceListener(
            name: "jobs",
            memoryPressure: { context in
                log.append("jobs.memoryPressure \(context.budgets(for: "jobs").memoryPressure)")
            },
            run: { ready in
                ready()
                try? await gracefulShutdown()
            }
        )
        try await Self.withGroup([part], interval: .seconds(1)) { group, observer in
            group.requestMemoryPressure()
            try await log.wait { !$0.isEmpty }
        }
        #expect(log.values.count == 1)
        #expect(log.values.first?.hasPrefix("jobs.memoryPressure ") == true, "\(log.values)")
    }

    /// A burst within one interval is one event; the reports dropped are counted in the records
    /// (each counts those dropped since the one before), and the next event comes only once the
    /// interval has passed (on the test clock: a report 1 ms short of it is dropped too).
    @Test func aBurstIsRateLimitedAndCounted() async throws {
        let log = AsyncRecorder<String>()
        let clock = TestClock()
        try await Self.withGroup([RecordingListener("cache", log: log)], interval: .milliseconds(300), clock: clock) {
            group,
            observer in
            let events: @Sendable () -> [Int] = {
                observer.kinds.values.compactMap { record -> Int? in
                    if case .memoryPressure(let skipped) = record { return skipped }
                    return nil
                }
            }
            for _ in 0..<100 { group.requestMemoryPressure() }
            try await observer.kinds.wait { $0.contains { if case .memoryPressure = $0 { true } else { false } } }
            // One report 1 ms short of the interval (dropped), one past it (let through), one
            // 1 ms short again (dropped), one exactly at the interval (let through).
            for at in [299, 600, 899, 900] {
                clock.advance(to: .milliseconds(at))
                group.requestMemoryPressure()
            }
            // Every drop is counted in the next event's record: 99 + 1 + 1. (Events may collapse
            // while one waits, so their number is 2 or 3; a wrong interval changes the count of
            // drops: one let through too early, or one dropped at the interval, is never counted.)
            try await observer.kinds.wait(timeout: .seconds(5), "101 dropped reports counted") { records in
                records.reduce(0) { sum, record in
                    if case .memoryPressure(let skipped) = record { sum + skipped } else { sum }
                } >= 101
            }
            #expect(events().reduce(0, +) == 101, "\(events())")
        }
        #expect((2...3).contains(log.values.filter { $0 == "cache.memoryPressure" }.count))
    }

    @Test func aStoppingGroupIgnoresIt() async throws {
        let log = AsyncRecorder<String>()
        let gate = Gate()
        let listener = RecordingListener("slow", log: log, behaviors: ["terminate": .wait(gate)])
        try await Self.withGroup([listener], interval: .zero) { group, observer in
            group.requestTermination(.requested("test"))
            try await log.wait { $0.contains("slow.terminate") }
            group.requestMemoryPressure()
            gate.open()
            try await observer.kinds.wait { $0.contains { if case .stopped = $0 { true } else { false } } }
        }
        #expect(!log.values.contains("slow.memoryPressure"))
    }
}
