import CoreMetrics
import Logging
import MetricsTestKit
import Testing
import VigilLifecycle
import VigilTesting

/// What the mediator reports through swift-metrics (LifecycleMetrics' table), with
/// MetricsTestKit's factory passed in the configuration (no process-wide bootstrap).
@Suite struct MetricsTests {
    @Test func reloadsByResultHookFailuresByListenerAndHookDurations() async throws {
        let metrics = TestMetrics()
        let log = AsyncRecorder<String>()
        let picky = RecordingListener("picky", log: log)
        let notifier = RecordingNotifier()
        let observer = RecordingObserver()
        let group = try ListenerGroup(
            listeners: [
                picky,
                RecordingListener(
                    "wedged",
                    budgets: .init(userSignal: .milliseconds(20)),
                    log: log,
                    behaviors: ["userSignal": .hang]
                ),
            ],
            configuration: .init(
                logger: Logger(label: "test"),
                signals: SignalMap(),
                observers: [observer],
                metrics: metrics
            ).reporting(to: notifier)
        )
        let running = Task { try await group.run() }
        try await notifier.waitForReady()
        #expect(try metrics.expectGauge("vigil_configuration_generation").lastValue == 1)

        group.requestReload()
        try await observer.kinds.wait { $0.contains { if case .reloadApplied = $0 { true } else { false } } }
        picky.setBehavior(.fail("no"), for: "prepare")
        group.requestReload()
        try await observer.kinds.wait { $0.contains { if case .reloadRejected = $0 { true } else { false } } }
        group.requestUserSignal(.sigusr1)
        try await observer.kinds.wait { $0.contains(.userSignal(.sigusr1)) }
        group.requestTermination(.requested("test"))
        try await running.value

        #expect(metrics.counterTotal(label: "vigil_reloads_total", dimensions: [("result", "applied")]) == 1)
        #expect(metrics.counterTotal(label: "vigil_reloads_total", dimensions: [("result", "rejected")]) == 1)
        #expect(try metrics.expectGauge("vigil_configuration_generation").lastValue == 2)
        #expect(
            metrics.counterTotal(
                label: "vigil_hook_failures_total",
                dimensions: [("listener", "picky"), ("hook", "prepare-reload"), ("kind", "threw")]
            ) == 1
        )
        #expect(
            metrics.counterTotal(
                label: "vigil_hook_failures_total",
                dimensions: [("listener", "wedged"), ("hook", "user-signal"), ("kind", "overran")]
            ) == 1
        )
        let starts = try metrics.expectTimer(
            "vigil_hook_duration_seconds",
            [("listener", "picky"), ("hook", "start")]
        )
        #expect(starts.values.count == 1)
        let prepares = try metrics.expectTimer(
            "vigil_hook_duration_seconds",
            [("listener", "wedged"), ("hook", "prepare-reload")]
        )
        #expect(prepares.values.count == 1, "the second reload stopped at picky")
        let overrun = try metrics.expectTimer(
            "vigil_hook_duration_seconds",
            [("listener", "wedged"), ("hook", "user-signal")]
        )
        #expect(overrun.values.allSatisfy { $0 >= 20_000_000 }, "an overrun lasts its budget: \(overrun.values)")
    }

    @Test func aFailedStartIsCountedByStep() async throws {
        let metrics = TestMetrics()
        let group = try ListenerGroup(
            listeners: [RecordingListener("db", log: AsyncRecorder(), behaviors: ["start": .fail("refused")])],
            configuration: .init(logger: Logger(label: "test"), signals: SignalMap(), metrics: metrics)
        )
        await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(metrics.counterTotal(label: "vigil_start_failures_total", dimensions: [("listener", "db")]) == 1)
    }
}
