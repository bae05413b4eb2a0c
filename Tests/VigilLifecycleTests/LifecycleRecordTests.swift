import Testing
import VigilLifecycle

/// What a record reads as: its event (all an observer outside the package compares) and what it carries.
@Suite struct LifecycleRecordTests {
    @Test func aRejectionCarriesItsListenerReasonAndTheGenerationStillInForce() {
        let record = LifecycleRecord(
            .reloadRejected(.init(listener: "configuration", reason: "port in use"), generation: 3, duration: .zero)
        )
        #expect(record.event == .reloadRejected)
        #expect(record.event != .reloadApplied)
        #expect(record.generation == 3)
        #expect(record.listener == "configuration")
        #expect(record.reason == "port in use")
        #expect(record.line == "reload-rejected generation 3 configuration: port in use")
    }

    @Test func eachKindHasItsEventAndOnlyWhatItCarries() {
        let started = LifecycleRecord(.started(generation: 1, timeToReady: .milliseconds(5)))
        #expect(started.event == .started && started.generation == 1)
        #expect(started.listener == nil && started.reason == nil)
        let stopping = LifecycleRecord(.stopping(.signal(.sigterm)))
        #expect(stopping.event == .stopping && stopping.reason == "SIGTERM" && stopping.generation == nil)
        let signal = LifecycleRecord(.userSignal(.sigusr2))
        #expect(signal.line == "user-signal SIGUSR2")
        let failed = LifecycleRecord(.listenerFailed(listener: "worker", event: "reload", reason: "threw"))
        #expect(failed.event == .listenerFailed && failed.listener == "worker" && failed.reason == "threw")
        #expect(LifecycleRecord(.stopped(uptime: .seconds(2))).line == "stopped")
        #expect(LifecycleRecord.Event.memoryPressure.name == "memory-pressure")
    }
}
