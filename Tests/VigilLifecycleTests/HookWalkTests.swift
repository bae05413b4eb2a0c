import Logging
import Testing
import VigilLifecycle
import VigilTesting

/// Hooks are called inline, one walk per event; one watcher follows whichever hook runs once
/// the walk has suspended.
@Suite struct HookWalkTests {
    @Test func theWatcherFollowsTheRunningHookAfterTheWalkSuspended() async throws {
        let log = AsyncRecorder<String>()
        let gate = Gate()
        let listeners = [
            // Suspends (the walk is now watched), then returns once the test opens the gate.
            RecordingListener("slow", log: log, behaviors: ["userSignal": .wait(gate)]),
            // Hangs, ignoring cancellation, in the same walk: its own budget must end it.
            RecordingListener(
                "wedged",
                budgets: .init(userSignal: .milliseconds(50)),
                log: log,
                behaviors: ["userSignal": .hang]
            ),
            RecordingListener("last", log: log),
        ]
        let observers = AsyncRecorder<RecordingObserver>()
        let clock = TestClock()
        try await withRunningDaemon(listeners: listeners, clock: clock) { daemon in
            observers.append(daemon.observer)
            // Should a wait below fail, the budgets run out anyway so that the daemon can stop.
            defer { clock.advance(by: .seconds(3600)) }
            daemon.group.requestUserSignal(.sigusr1)
            try await log.wait { $0.contains("slow.userSignal") }
            // The watcher follows 'slow' (its 10 s default budget), then 'wedged' (50 ms from
            // when it began): 1 ms short of that budget it still runs, then it is abandoned.
            try await clock.waitForSleep(until: .seconds(10))
            gate.open()
            try await log.wait { $0.contains("wedged.userSignal") }
            try await clock.waitForSleep(until: .milliseconds(50))
            clock.advance(by: .milliseconds(49))
            #expect(!daemon.observer.kinds.values.contains(.userSignal(.sigusr1)))
            clock.advance(by: .milliseconds(1))
            try await daemon.observer.kinds.wait { $0.contains(.userSignal(.sigusr1)) }
        }
        let observer = try #require(observers.values.first)
        #expect(log.values.contains("slow.userSignal.done"))
        #expect(log.values.contains("last.userSignal.done"))
        #expect(!log.values.contains("wedged.userSignal.done"))
        #expect(
            observer.kinds.values.contains(
                .listenerFailed(
                    listener: "wedged",
                    event: "user signal SIGUSR1",
                    reason: "did not finish within its user-signal budget of 50 ms"
                )
            )
        )
    }

    @Test func aStopRequestAnswersAWaitingHealthProbeAtOnce() async throws {
        let log = AsyncRecorder<String>()
        let gate = Gate()
        let listener = RecordingListener(
            "busy",
            budgets: .init(health: .seconds(60)),
            log: log,
            behaviors: ["health": .wait(gate)]
        )
        try await withRunningDaemon(listeners: [listener]) { daemon in
            let probe = Task { await daemon.group.probeHealth(timeout: .seconds(60)) }
            try await log.wait { $0.contains("busy.health") }
            let asked = ContinuousClock.now
            daemon.group.requestTermination(.requested("test"))
            #expect(await probe.value == false, "a stopping daemon is not healthy")
            #expect(ContinuousClock.now - asked < .seconds(30), "answered at the stop request, not at the timeout")
            gate.open()
        }
    }

    @Test func eachSignalStandsForOneEvent() {
        var map = SignalMap.default
        map.reloadSignal = .realTime(3)
        #expect(map.event(for: .realTime(3)) == .reload)
        #expect(map.event(for: .sighup) == nil)
        #expect(map.event(for: .sigterm) == .terminate(.signal(.sigterm)))
        #expect(map.event(for: .sigint) == .terminate(.signal(.sigint)))
        #expect(map.event(for: .sigusr2) == .userSignal(.sigusr2))
    }
}
