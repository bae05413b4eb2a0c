import Synchronization
import VigilEventLoop

/// A clock that moves only when the test advances it, for budgets, schedules and watchdog
/// rounds without real waits (in the manner of NIO's `NIOAsyncTestingEventLoop.advanceTime`).
///
/// ```swift
/// let clock = TestClock()
/// try await withRunningDaemon(listeners: [listener], clock: clock) { daemon in
///     // … a hook that hangs, with a 50 ms budget:
///     try await clock.waitForSleep(until: .milliseconds(50))  // the budget's timer is armed
///     clock.advance(by: .milliseconds(50))                    // and now it ran out
/// }
/// ```
///
/// Pass it to ``withRunningDaemon(listeners:budgets:watchdogInterval:values:logger:clock:_:)``
/// to run a daemon's budgets, probe timeouts, watchdog rounds and periodic tasks on it.
///
/// Time starts at zero. Sleepers whose deadline comes are woken in deadline order; what they
/// do then runs on their own tasks, so a test awaits its effect (an ``AsyncRecorder``) as usual.
public final class TestClock: ManualClock {
    private struct Sleeper {
        let id: Int
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Duration = .zero
        var sleepers: [Sleeper] = []
        var nextID = 0
        /// Sleeps cancelled before they were registered.
        var cancelled: Set<Int> = []
    }

    private let state = Mutex(State())
    /// The deadline of every sleep that began waiting, in order.
    private let arrivals = AsyncRecorder<Duration>()
    private let advancesWhenSlept: Bool

    /// A clock at zero. With `advancesWhenSlept`, every sleep moves the clock to its deadline
    /// and returns at once (for a loop whose waits the test only records, ``sleeps``).
    public init(advancesWhenSlept: Bool = false) {
        self.advancesWhenSlept = advancesWhenSlept
    }

    /// This clock as the seam Vigil's timers take.
    package var loopClock: LoopClock { LoopClock(self) }

    public var now: Duration { state.withLock { $0.now } }

    /// The deadline of every sleep that began, in order.
    public var sleeps: [Duration] { arrivals.values }

    public func sleep(until deadline: Duration) async throws {
        if advancesWhenSlept {
            state.withLock { $0.now = max($0.now, deadline) }
            arrivals.append(deadline)
            await Task.yield()
            try Task.checkCancellation()
            return
        }
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let early = state.withLock { state -> Result<Void, any Error>? in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return nil
                }
                if let early { continuation.resume(with: early) } else { arrivals.append(deadline) }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
                    return state.sleepers.remove(at: index).continuation
                }
                state.cancelled.insert(id)
                return nil
            }
            waiting?.resume(throwing: CancellationError())
        }
    }

    /// Moves time on by `duration` and wakes every sleeper whose deadline came, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now += duration
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves time on to `instant` (nothing when it has passed).
    public func advance(to instant: Duration) {
        advance(by: max(instant - now, .zero))
    }

    /// Waits until a sleep until `deadline` began waiting on this clock: the timer a test is
    /// about to run out is armed. Throws ``AsyncRecorder/TimedOut`` after `timeout` (real time).
    public func waitForSleep(until deadline: Duration, timeout: Duration = .seconds(30)) async throws {
        try await arrivals.wait(timeout: timeout, "a sleep until \(deadline) on the test clock") {
            $0.contains(deadline)
        }
    }

    /// Waits until `count` sleeps in all began waiting on this clock.
    public func waitForSleeps(_ count: Int, timeout: Duration = .seconds(30)) async throws {
        try await arrivals.wait(timeout: timeout, "\(count) sleep(s) on the test clock") { $0.count >= count }
    }
}
