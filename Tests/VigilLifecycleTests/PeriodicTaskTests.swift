import Synchronization
import Testing
import VigilLifecycle
import VigilTesting

@Suite struct PeriodicTaskTests {
    /// Issue 10 #13: every applied reload re-armed the checkpoint timer, so reloads more frequent
    /// than the interval starved it. Rescheduling with the same interval must keep the phase.
    @Test func reschedulingWithTheSameIntervalKeepsThePhase() async throws {
        let clock = TestClock()
        let ticks = AsyncRecorder<Duration>()
        let task = PeriodicTask(clock: clock.loopClock)
        task.schedule(every: .milliseconds(100)) { ticks.append(clock.now) }
        for tick in 1...3 {
            let due = Duration.milliseconds(100 * tick)
            try await clock.waitForSleep(until: due)
            // "Reloads" every 40 ms, more often than the interval: each reschedules it.
            while clock.now + .milliseconds(40) < due {
                clock.advance(by: .milliseconds(40))
                task.schedule(every: .milliseconds(100))
            }
            clock.advance(to: due)
            try await ticks.wait(timeout: .seconds(10), "tick \(tick) despite rescheduling") { $0.count >= tick }
        }
        #expect(ticks.values == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        await task.stop()
        #expect(task.interval == .zero)
    }

    @Test func aNewIntervalTakesEffectAndZeroStops() async throws {
        let clock = TestClock()
        let ticks = AsyncRecorder<Duration>()
        let task = PeriodicTask(clock: clock.loopClock)
        task.schedule(every: .seconds(3600)) { ticks.append(clock.now) }
        try await clock.waitForSleep(until: .seconds(3600))
        // An hour-long interval shortened: the next tick comes at once (an hour after the start
        // has not passed, but a 20 ms interval counted from the start has), then every 20 ms
        // from it: not at 40 ms, on the grid counted from the start, 10 ms after (a helper's
        // daemon saw two ticks 111 ms apart when its 1 s interval became 0.3 s).
        clock.advance(by: .milliseconds(30))
        task.schedule(every: .milliseconds(20))
        try await ticks.wait(timeout: .seconds(10), "the tick at once") { $0.count >= 1 }
        for due in [50, 70] {
            try await clock.waitForSleep(until: .milliseconds(due))
            clock.advance(to: .milliseconds(due))
            try await ticks.wait(timeout: .seconds(10), "the tick at \(due) ms") { $0.last == .milliseconds(due) }
        }
        #expect(ticks.values == [.milliseconds(30), .milliseconds(50), .milliseconds(70)])
        task.schedule(every: .zero)
        #expect(task.interval == .zero)
        // No tick after zero: a new action on a fresh schedule (counted from now) is the only
        // one that runs.
        let after = AsyncRecorder<Duration>()
        task.schedule(every: .milliseconds(10)) { after.append(clock.now) }
        try await clock.waitForSleep(until: .milliseconds(80))
        clock.advance(by: .milliseconds(100))
        try await after.wait(timeout: .seconds(10), "the new action") { !$0.isEmpty }
        await task.stop()
        #expect(after.values == [.milliseconds(170)], "ticks missed while the clock jumped are skipped")
        #expect(ticks.values.count == 3)
    }

    /// A fresh schedule counts from when it was started, however late its task first runs (a
    /// review: the late first tick re-anchored it when the clock moved before the task began, and
    /// not when it moved after, so the ticks depended on timing).
    @Test func aFreshScheduleKeepsItsStartWhateverWhenItsTaskRuns() async throws {
        let clock = TestClock()
        let ticks = AsyncRecorder<Duration>()
        let task = PeriodicTask(clock: clock.loopClock)
        task.schedule(every: .milliseconds(20)) { ticks.append(clock.now) }
        clock.advance(to: .milliseconds(25))  // maybe before the loop's task ran, maybe after
        try await ticks.wait(timeout: .seconds(10), "the late first tick") { !$0.isEmpty }
        try await clock.waitForSleep(until: .milliseconds(40))
        clock.advance(to: .milliseconds(40))
        try await ticks.wait(timeout: .seconds(10), "the tick at 40 ms") { $0.count >= 2 }
        await task.stop()
        #expect(ticks.values == [.milliseconds(25), .milliseconds(40)])
    }

    @Test func stopWaitsForARunningTick() async throws {
        let clock = TestClock()
        let task = PeriodicTask(clock: clock.loopClock)
        let entered = AsyncRecorder<Int>()
        let gate = Gate()
        let finished = Mutex(false)
        task.schedule(every: .milliseconds(5)) {
            entered.append(1)
            await gate.wait()
            finished.withLock { $0 = true }
        }
        try await clock.waitForSleep(until: .milliseconds(5))
        clock.advance(by: .milliseconds(5))
        try await entered.wait(timeout: .seconds(10), "the first tick") { !$0.isEmpty }
        let stopping = Task { await task.stop() }
        // stop() has begun (it zeroes the interval first) before the tick may finish.
        while task.interval != .zero { await Task.yield() }
        gate.open()
        await stopping.value
        #expect(finished.withLock { $0 }, "stop() returned before the running tick finished")
    }

    /// `stop()` from the action waited for its own task, and never returned (a helper's
    /// finding: a one-shot timer hung its tick's task for good). Now that tick is the last.
    @Test func stopFromTheActionEndsTheScheduleAfterThatTick() async throws {
        let clock = TestClock()
        let task = PeriodicTask(clock: clock.loopClock)
        let log = AsyncRecorder<String>()
        task.schedule(every: .milliseconds(100)) {
            log.append("tick")
            await task.stop()
            log.append("stop returned")
        }
        try await clock.waitForSleep(until: .milliseconds(100))
        clock.advance(by: .milliseconds(100))
        try await log.wait(timeout: .seconds(10), "stop() called from the tick returns") {
            $0.contains("stop returned")
        }
        #expect(task.interval == .zero)
        // A schedule set afterwards starts afresh, and ticks.
        task.schedule(every: .milliseconds(50))
        try await clock.waitForSleep(until: .milliseconds(150))
        clock.advance(by: .milliseconds(50))
        try await log.wait(timeout: .seconds(10), "the next schedule's tick") { $0.count == 4 }
        await task.stop()
        #expect(log.values == ["tick", "stop returned", "tick", "stop returned"])
    }

    /// A new interval set while a tick runs (here by the tick itself, backing off) cancelled
    /// that tick: its work failed with `CancellationError` (a helper's finding; a reload that
    /// changed the checkpoint interval during a periodic checkpoint cancelled it the same way).
    /// Now the tick finishes, and the new interval counts from it.
    @Test func aNewIntervalSetDuringATickLetsThatTickFinish() async throws {
        let clock = TestClock()
        let task = PeriodicTask(clock: clock.loopClock)
        let log = AsyncRecorder<String>()
        let gate = Gate()
        let count = Mutex(0)
        task.schedule(every: .milliseconds(100)) {
            let tick = count.withLock { count in
                count += 1
                return count
            }
            if tick == 1 {
                task.schedule(every: .milliseconds(200))
                await gate.wait()
            }
            log.append("tick \(tick) at \(clock.now) cancelled: \(Task.isCancelled)")
        }
        try await clock.waitForSleep(until: .milliseconds(100))
        clock.advance(by: .milliseconds(100))
        try await gate.waitForWaiters(1)
        gate.open()
        try await log.wait(timeout: .seconds(10), "the first tick's end") { !$0.isEmpty }
        try await clock.waitForSleep(until: .milliseconds(300))
        clock.advance(to: .milliseconds(300))
        try await log.wait(timeout: .seconds(10), "the tick at the new interval") { $0.count == 2 }
        await task.stop()
        #expect(log.values == ["tick 1 at 0.1 seconds cancelled: false", "tick 2 at 0.3 seconds cancelled: false"])
    }

    /// A new action with the interval in force was kept aside and never run (a helper's
    /// finding); now it runs from the next tick, in the same phase.
    @Test func aNewActionWithTheSameIntervalRunsFromTheNextTick() async throws {
        let clock = TestClock()
        let task = PeriodicTask(clock: clock.loopClock)
        let log = AsyncRecorder<String>()
        task.schedule(every: .milliseconds(100)) { log.append("old at \(clock.now)") }
        try await clock.waitForSleep(until: .milliseconds(100))
        clock.advance(by: .milliseconds(100))
        try await log.wait(timeout: .seconds(10), "the first tick") { $0.count == 1 }
        task.schedule(every: .milliseconds(100)) { log.append("new at \(clock.now)") }
        try await clock.waitForSleep(until: .milliseconds(200))
        clock.advance(to: .milliseconds(200))
        try await log.wait(timeout: .seconds(10), "the second tick") { $0.count == 2 }
        await task.stop()
        #expect(log.values == ["old at 0.1 seconds", "new at 0.2 seconds"])
    }

    /// A tick that waits at `gate` and records when it is cancelled; `schedules` runs inside
    /// the first tick, before it waits (a reload changing the interval meanwhile).
    private static func gatedFirstTick(
        _ task: PeriodicTask,
        gate: Gate,
        log: AsyncRecorder<String>,
        running: Overlap,
        schedules: @escaping @Sendable () -> Void
    ) -> @Sendable () async -> Void {
        let count = Mutex(0)
        return {
            let tick = count.withLock { count in
                count += 1
                return count
            }
            running.enter()
            log.append("tick \(tick) begins")
            if tick == 1 {
                schedules()
                await withTaskCancellationHandler {
                    await gate.wait()
                } onCancel: {
                    log.append("tick 1 cancelled")
                }
            }
            running.leave()
            log.append("tick \(tick) ends")
        }
    }

    /// Reviewer's cases: interval changes during one tick. Turned off and on again: the new
    /// loop started beside the running tick (two at once); changed twice: the middle loop slept
    /// out its hour, and `stop()` with it.
    @Test func intervalChangesDuringATickNeverRunTwoTicksAtOnceOrHangTheStop() async throws {
        for changes in [[Duration.zero, .milliseconds(50)], [.seconds(3600), .milliseconds(50)]] {
            let clock = TestClock()
            let task = PeriodicTask(clock: clock.loopClock)
            let (gate, log, running) = (Gate(), AsyncRecorder<String>(), Overlap())
            task.schedule(
                every: .milliseconds(100),
                Self.gatedFirstTick(task, gate: gate, log: log, running: running) {
                    for interval in changes { task.schedule(every: interval) }
                }
            )
            try await clock.waitForSleep(until: .milliseconds(100))
            clock.advance(to: .milliseconds(100))
            try await gate.waitForWaiters(1)
            clock.advance(to: .milliseconds(150))  // the new schedule's first tick is due
            gate.open()
            try await log.wait(timeout: .seconds(10), "tick 2 (\(changes))") { $0.contains("tick 2 ends") }
            let stopped = AsyncRecorder<Bool>()
            Task {
                await task.stop()
                stopped.append(true)
            }
            try await stopped.wait(timeout: .seconds(10), "stop() (\(changes))") { !$0.isEmpty }
            #expect(log.values == ["tick 1 begins", "tick 1 ends", "tick 2 begins", "tick 2 ends"], "\(changes)")
            #expect(running.most == 1, "two ticks ran at once (\(changes))")
        }
    }

    /// Reviewer's cases: `stop()` from outside after the interval changed during a tick (to
    /// zero, or to another) returned before the tick ended, or did not cancel it. It cancels
    /// the running tick and waits for it.
    @Test func stopAfterAnIntervalChangeDuringATickCancelsAndWaitsForIt() async throws {
        for change in [Duration.zero, .milliseconds(300)] {
            let clock = TestClock()
            let task = PeriodicTask(clock: clock.loopClock)
            let (gate, log, running) = (Gate(), AsyncRecorder<String>(), Overlap())
            task.schedule(
                every: .milliseconds(100),
                Self.gatedFirstTick(task, gate: gate, log: log, running: running) { task.schedule(every: change) }
            )
            try await clock.waitForSleep(until: .milliseconds(100))
            clock.advance(to: .milliseconds(100))
            try await gate.waitForWaiters(1)
            let stopping = Task {
                await task.stop()
                log.append("stop returned")
            }
            try await log.wait(timeout: .seconds(10), "the tick cancelled (\(change))") {
                $0.contains("tick 1 cancelled")
            }
            gate.open()
            await stopping.value
            #expect(log.values == ["tick 1 begins", "tick 1 cancelled", "tick 1 ends", "stop returned"], "\(change)")
        }
    }

    @Test func anAbsurdIntervalDoesNotTrap() async {
        let task = PeriodicTask()
        task.schedule(every: .seconds(Int64.max)) {}
        #expect(task.interval > .seconds(3_000_000_000))
        await task.stop()
    }
}

/// How many ticks run at once, and the most that did.
private final class Overlap: Sendable {
    private let state = Mutex((now: 0, most: 0))
    var most: Int { state.withLock { $0.most } }
    func enter() {
        state.withLock { state in
            state.now += 1
            state.most = max(state.most, state.now)
        }
    }
    func leave() { state.withLock { $0.now -= 1 } }
}
