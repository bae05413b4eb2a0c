import Synchronization
import Testing
import VigilLifecycle
import VigilTesting

@Suite struct PeriodicTaskTests {
    /// Issue 10 #13: every applied reload re-armed the checkpoint timer, so reloads more frequent
    /// than the interval starved it. Rescheduling with the same interval must keep the phase.
    @Test func reschedulingWithTheSameIntervalKeepsThePhase() async throws {
        let ticks = AsyncRecorder<Int>()
        let task = PeriodicTask()
        let count = Mutex(0)
        task.schedule(every: .milliseconds(100)) {
            ticks.append(
                count.withLock { count in
                    count += 1
                    return count
                }
            )
        }
        // "Reloads" every 40 ms, more often than the interval, until three ticks happened.
        let reloads = Task {
            while !Task.isCancelled {
                task.schedule(every: .milliseconds(100))
                try? await Task.sleep(for: .milliseconds(40))
            }
        }
        defer { reloads.cancel() }
        try await ticks.wait(timeout: .seconds(10), "three ticks despite rescheduling") { $0.count >= 3 }
        reloads.cancel()
        await reloads.value
        await task.stop()
        #expect(task.interval == .zero)
    }

    @Test func aNewIntervalTakesEffectAndZeroStops() async throws {
        let ticks = AsyncRecorder<ContinuousClock.Instant>()
        let task = PeriodicTask()
        task.schedule(every: .seconds(3600)) { ticks.append(.now) }
        // An hour-long interval shortened: the next tick comes at once (an hour after the start
        // has not passed, but a 20 ms interval counted from the start has).
        try await Task.sleep(for: .milliseconds(30))
        task.schedule(every: .milliseconds(20))
        try await ticks.wait(timeout: .seconds(10), "ticks at the new interval") { $0.count >= 3 }
        task.schedule(every: .zero)
        #expect(task.interval == .zero)
        let stoppedAt = ticks.values.count
        // No tick after zero: a new action on a fresh schedule is the only one that runs.
        let after = AsyncRecorder<Int>()
        task.schedule(every: .milliseconds(10)) { after.append(1) }
        try await after.wait(timeout: .seconds(10), "the new action") { !$0.isEmpty }
        await task.stop()
        #expect(ticks.values.count <= stoppedAt + 1, "at most a tick already running when zero came")
    }

    @Test func stopWaitsForARunningTick() async throws {
        let task = PeriodicTask()
        let entered = AsyncRecorder<Int>()
        let gate = Gate()
        let finished = Mutex(false)
        task.schedule(every: .milliseconds(5)) {
            entered.append(1)
            await gate.wait()
            finished.withLock { $0 = true }
        }
        try await entered.wait(timeout: .seconds(10), "the first tick") { !$0.isEmpty }
        let stopping = Task { await task.stop() }
        // stop() has begun (it zeroes the interval first) before the tick may finish.
        while task.interval != .zero { await Task.yield() }
        gate.open()
        await stopping.value
        #expect(finished.withLock { $0 }, "stop() returned before the running tick finished")
    }

    @Test func anAbsurdIntervalDoesNotTrap() async {
        let task = PeriodicTask()
        task.schedule(every: .seconds(Int64.max)) {}
        #expect(task.interval > .seconds(3_000_000_000))
        await task.stop()
    }
}
