import Synchronization
import VigilEventLoop

/// Runs an action on a fixed schedule — every `interval`, counted from when it was started —
/// until it is stopped: a heartbeat, a periodic checkpoint, a cache refresh. The first tick
/// comes one interval after ``schedule(every:_:)``, not at once: work wanted at start belongs
/// in the listener's `start` (call the action there, then schedule it).
///
/// ```swift
/// let checkpoints = PeriodicTask()
/// checkpoints.schedule(every: .seconds(30)) { try? store.checkpoint() }
/// // on an applied reload:
/// checkpoints.schedule(every: newInterval)   // same interval: nothing changes
/// // at stop:
/// await checkpoints.stop()
/// ```
///
/// What it guarantees:
/// - **A timer keeps its phase.** Scheduling again with the interval already in force changes
///   nothing, so reloads that do not touch the interval never delay a tick (a daemon reloaded
///   every 0.5 s still checkpoints every 1 s). A new interval counts from the last tick (or from
///   the start when there was none); when that moment has passed, the next tick is now and the
///   ones after it count from it.
/// - **No drift, no bursts.** Ticks follow `start + n × interval`, whatever the action's own
///   duration; ticks missed while the action ran long (or the process was stopped) are skipped,
///   not replayed.
/// - **Zero means off**: no task and no timer, so an idle daemon has no wake-ups.
/// - **A tick runs to its end.** A new interval or action set while a tick runs (from the tick
///   itself, or a reload) takes effect from the next tick, and never runs beside it; a new
///   action with the same interval keeps the phase. ``stop()`` called from the action ends the
///   schedule after that tick (it does not wait for itself).
///
/// The action runs in a task of its own (under ``VigilEventLoop/EventLoopExecutor``, on the loop's thread);
/// sleeps use ``VigilEventLoop/EventLoopExecutor/sleep(for:)``.
///
/// **Whose clock.** A schedule started from a listener's hook (or from a `Task {}` that hook
/// started; a `Task.detached` inherits nothing) follows the daemon's clock: the monotonic clock in
/// a daemon, the test's `TestClock` under the test kit's `withRunningDaemon(clock:)`, so a test
/// advances a daemon's own periodic work as it advances the library's (`clock.advance(by:)`).
/// One started anywhere else follows the monotonic clock. A schedule keeps its clock until it is
/// stopped; the next start chooses again (a listener reused in a second daemon run follows that
/// run's clock).
public final class PeriodicTask: Sendable {
    private struct State {
        var interval: Duration = .zero
        var action: (@Sendable () async -> Void)?
        /// When the schedule started, or the last tick.
        var anchor: Duration?
        var task: Task<Void, Never>?
        /// Bumped by every (re)start so that a replaced loop never records a tick.
        var epoch = 0
        /// What the running schedule's ticks follow; `nil` while stopped (the next start
        /// chooses).
        var clock: LoopClock?
        /// The loop whose action runs now (of this epoch or an earlier one), if any: a loop
        /// that replaces it starts after it, and `stop()` cancels and waits for it too.
        var runningTick: (epoch: Int, task: Task<Void, Never>)?
    }

    /// The task whose action runs in this task, if any: `stop()` from the action must not wait
    /// for itself.
    @TaskLocal private static var ticking: ObjectIdentifier?

    /// The clock of the daemon whose mediator runs this task (bound by `ListenerGroup.run()`
    /// around everything it runs), if any: a schedule that starts without a clock of its own
    /// follows it.
    @TaskLocal package static var daemonClock: LoopClock?

    private let state = Mutex(State())
    /// The clock given at `init`, if any: every start follows it instead of choosing.
    private let given: LoopClock?

    /// Creates a stopped task.
    public init() { given = nil }

    /// Creates a stopped task whose ticks follow `clock` (a test's, advanced by hand).
    package init(clock: LoopClock) { given = clock }

    /// The interval in force; zero when stopped.
    package var interval: Duration { state.withLock { $0.interval } }

    /// Starts ticking every `interval` with `action`, or changes the interval of a running
    /// schedule while keeping its action (pass `action` as `nil`).
    ///
    /// - Parameters:
    ///   - interval: the period; zero or less stops the schedule.
    ///   - action: what each tick does; `nil` keeps the action already set.
    public func schedule(every interval: Duration, _ action: (@Sendable () async -> Void)? = nil) {
        // Longer than any real period (a century), short enough that instants never overflow.
        let interval = min(interval, .seconds(3_155_760_000))
        let previous: Task<Void, Never>? = state.withLock { state in
            if let action { state.action = action }
            if interval == state.interval, state.task != nil || interval <= .zero {
                return nil  // same interval: keep the phase
            }
            // The loop replaced is cancelled unless its action runs now: that one ends after
            // its tick, and the next loop starts after it.
            let previous = state.task.take()
            let waiting = state.runningTick?.epoch == state.epoch ? nil : previous
            state.interval = max(interval, .zero)
            state.epoch += 1
            guard interval > .zero, state.action != nil else {
                state.anchor = nil
                state.clock = nil
                return waiting
            }
            // A schedule keeps the clock it started on: its anchor is that clock's instant.
            let clock = state.clock ?? given ?? Self.daemonClock ?? .monotonic
            state.clock = clock
            let now = clock.now
            let anchor = state.anchor ?? now
            state.anchor = anchor
            // A first tick already due under a new interval (counted from a tick long ago) comes
            // now, and the ticks after it count from it: two ticks never come closer than the
            // interval (they came at once and then on the old grid: 111 ms apart after 1 s → 0.3 s).
            state.task = Self.loop(
                self,
                clock: clock,
                epoch: state.epoch,
                interval: interval,
                first: max(anchor + interval, now),
                after: state.runningTick?.task
            )
            return waiting
        }
        previous?.cancel()
    }

    /// Stops ticking and waits until a tick that is running has finished (it is cancelled).
    /// Called from the action, the tick that called it is the last, and it returns at once.
    public func stop() async {
        let (task, tick) = state.withLock { state -> (Task<Void, Never>?, Task<Void, Never>?) in
            state.interval = .zero
            state.anchor = nil
            state.clock = nil
            state.epoch += 1
            return (state.task.take(), state.runningTick?.task)
        }
        // From the action, the tick ends by itself when the action returns: waiting for it
        // would wait for ever, and cancelling it would cut the action that asked. A loop that
        // waits for it is cancelled (it would not tick); a schedule set later in that tick
        // starts after it.
        if Self.ticking == ObjectIdentifier(self) {
            if let task, task != tick { task.cancel() }
            return
        }
        task?.cancel()
        tick?.cancel()
        await task?.value
        await tick?.value
    }

    private static func loop(
        _ owner: PeriodicTask,
        clock: LoopClock,
        epoch: Int,
        interval: Duration,
        first: Duration,
        after previous: Task<Void, Never>?
    ) -> Task<Void, Never> {
        // The schedule outlives the call that set it: it runs until stopped or replaced.
        Task {
            var next = first
            if let previous {
                // The loop this one replaced ends first (after its tick, if one runs); a first
                // tick that fell due meanwhile comes now, and the ones after it count from it.
                await previous.value
                next = max(first, clock.now)
            }
            while !Task.isCancelled {
                let wait = next - clock.now
                if wait > .zero {
                    do {
                        try await clock.sleep(for: wait)
                    } catch {
                        return
                    }
                }
                let action = owner.state.withLock { state -> (@Sendable () async -> Void)? in
                    // `state.task` is this loop: its epoch is current, and `schedule` stored it
                    // before this loop could take the lock.
                    guard state.epoch == epoch, let action = state.action, let task = state.task else { return nil }
                    state.anchor = next
                    state.runningTick = (epoch, task)
                    return action
                }
                guard let action else { return }
                await $ticking.withValue(ObjectIdentifier(owner)) { await action() }
                let current = owner.state.withLock { state -> Bool in
                    if state.runningTick?.epoch == epoch { state.runningTick = nil }
                    return state.epoch == epoch
                }
                guard current else { return }
                next = next + interval
                let now = clock.now
                if next <= now {
                    // Fell behind (a long action, a stopped process): skip, do not replay.
                    next = now + interval
                }
            }
        }
    }
}
