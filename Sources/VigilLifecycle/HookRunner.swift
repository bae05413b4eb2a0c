import Synchronization
import VigilEventLoop

/// How one hook call ended.
enum HookOutcome<Value: Sendable>: Sendable {
    case returned(Value)
    case threw(any Error)
    /// The budget ran out; the hook was cancelled and abandoned.
    case overran(Duration)
    /// A second stop request cut the hook short.
    case interrupted
}

extension HookOutcome {
    /// The hook returned (whatever it returned).
    var returned: Bool {
        if case .returned = self { true } else { false }
    }
}

/// One event's hooks, called in order: what ``ListenerGroup/Core/runHooks(_:)`` needs from its caller.
struct HookSequence<Step: Sendable, Value: Sendable>: Sendable {
    /// Whose hooks, in the order they are called (listeners, start-up commands).
    var steps: [Step]
    /// After this long, a hook that is still running asks the service manager for more time.
    var extendAfter: Duration? = nil
    /// A second stop request abandons the running hook at once.
    var interruptible = false
    /// An interrupted hook is given its whole budget to end, not ``ListenerGroup/Core/interruptionGrace``
    /// (start hooks: one that does not honour the cancellation, such as a state store's open,
    /// finishes what it began, and its listener stops as one that started).
    var interruptedKeepsItsBudget = false
    /// Whether `settle` is told how long each hook ran (a clock read before and after each).
    var timed = false
    /// Whether `settle` hears hooks that returned; without, it hears failures only (and every
    /// hook when `timed`), and a hook that returned goes on to the next.
    var settlesReturns = true
    /// A step's budget.
    var budget: @Sendable (Step) -> Duration
    /// Calls a step's hook.
    var hook: @Sendable (Step) async throws -> Value
    /// Told outcomes in order (see `settlesReturns`), with the hook's duration when `timed`
    /// (or when it overran); returns whether to go on to the next hook.
    var settle: @Sendable (Step, HookOutcome<Value>, Duration?) -> Bool

    var count: Int { steps.count }
}

/// A walk over a ``HookSequence`` in one task, called inline one hook after the other.
///
/// The mediator starts the walk with `Task.immediate`: while no hook suspends (most never do)
/// the whole event runs on the mediator's thread, in one task, with no timer and no
/// allocation per hook. Once the walk suspends, the mediator waits for it and one watcher task
/// checks the deadline of whichever hook is running: a hook that outlives its budget (or a
/// second stop request, when interruptible) ends the walk's turn — the walk is cancelled and
/// abandoned with the hung hook in it, and the mediator goes on with the next hook in a new walk.
private final class HookWalk<Step: Sendable, Value: Sendable>: Sendable {
    enum End: Sendable {
        /// Every hook up to `next` ran and was settled; the walk stopped there.
        case finished(next: Int)
        /// Hook `index` did not end in time (or was interrupted): the walk was abandoned.
        case abandoned(index: Int, HookOutcome<Value>)
    }

    /// What the watcher does next.
    private enum WatchStep { case stop, overran(Int, Duration), extend(Duration), sleep(Duration) }

    private struct State {
        /// The hook running, or about to.
        var current: Int
        /// When `current` began, once the walk is watched (the clock is read only then).
        var began: Duration?
        /// When the watcher wakes next.
        var wake: Duration?
        /// The hook that already asked for more time.
        var extended: Int?
        var watcher: Task<Void, Never>?
        var end: End?
        var waiter: CheckedContinuation<Void, Never>?
        /// The walk's task returned.
        var taskEnded = false
        /// The mediator went on while the task still ran: counted in ``AbandonedHooks``.
        var leftRunning = false
        /// How the hook cut short by a second stop request ended after all, if it did.
        var lateOutcome: HookOutcome<Value>?
    }

    let hooks: HookSequence<Step, Value>
    private let extend: @Sendable (Duration) -> Void
    /// What deadlines count on. Instants are `Duration`s since the clock's start (a frozen type,
    /// unlike `ContinuousClock.Instant`): the walk's lock is taken once per hook.
    private let clock: LoopClock
    private let state: Mutex<State>

    /// A walk from hook `first` on; `extend` asks the service manager for more time.
    init(
        _ hooks: HookSequence<Step, Value>,
        from first: Int,
        clock: LoopClock,
        extend: @escaping @Sendable (Duration) -> Void
    ) {
        self.hooks = hooks
        self.clock = clock
        self.extend = extend
        self.state = Mutex(State(current: first))
    }

    /// Calls the hooks from `first` on, until one says stop, the last returned, or the walk
    /// is abandoned.
    func walk(from first: Int) async {
        // Read once: the loop would otherwise copy the sequence's closures out on every hook.
        let (steps, hook, timed, settlesReturns) = (hooks.steps, hooks.hook, hooks.timed, hooks.settlesReturns)
        var index = first
        while index < steps.count {
            let step = steps[index]
            let began = timed ? clock.now : nil
            let outcome: HookOutcome<Value>
            do {
                outcome = .returned(try await hook(step))
            } catch {
                outcome = .threw(error)
            }
            let next = index + 1
            let (abandoned, watched) = state.withLock { state -> (Bool, Bool) in
                guard state.end == nil else {
                    if case .abandoned(index, .interrupted)? = state.end { state.lateOutcome = outcome }
                    return (true, false)
                }
                state.current = next
                guard state.began != nil else { return (false, false) }
                state.began = clock.now
                return (false, true)
            }
            // Abandoned: the watcher settled this hook already; the mediator went on without us.
            if abandoned { return }
            if watched, next < steps.count { nextHookBegins(next) }
            index = next
            if settlesReturns || began != nil || !outcome.returned {
                if !hooks.settle(step, outcome, began.map { clock.now - $0 }) { break }
            }
        }
        let stoppedAt = index
        let (waiter, watcher) = state.withLock { state in
            guard state.end == nil else { return (nil, nil) as (CheckedContinuation<Void, Never>?, Task<Void, Never>?) }
            state.end = .finished(next: stoppedAt)
            return (state.waiter.take(), state.watcher.take())
        }
        watcher?.cancel()
        waiter?.resume()
    }

    /// The end, when the walk already ended (it never suspended, or it ended meanwhile).
    var end: End? { state.withLock { $0.end } }

    /// How the hook cut short by a second stop request ended after all, once it did.
    var lateOutcome: HookOutcome<Value>? { state.withLock { $0.lateOutcome } }

    /// The mediator goes on without this walk's task: counted in `abandoned` until it returns.
    func leave(counting abandoned: AbandonedHooks) {
        state.withLock { state in
            guard !state.taskEnded, !state.leftRunning else { return }
            state.leftRunning = true
            abandoned.add(1)
        }
    }

    /// The walk's task returned: no longer counted, if it was.
    func taskEnded(counting abandoned: AbandonedHooks) {
        state.withLock { state in
            state.taskEnded = true
            if state.leftRunning { abandoned.add(-1) }
        }
    }

    /// From now on the running hook's budget counts (from now: the time it ran before it
    /// suspended was the mediator's own), and so does every later hook's, under one watcher.
    func startWatching() {
        let watching = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.began = clock.now
            return true
        }
        if watching { restartWatcher() }
    }

    /// Hook `index` begins in a watched walk: its deadline counts from now, and the watcher
    /// wakes earlier if that deadline (or its time to ask for more) comes first.
    private func nextHookBegins(_ index: Int) {
        var due = hooks.budget(hooks.steps[index])
        if let after = hooks.extendAfter { due = min(due, after) }
        let sooner = state.withLock { state -> Bool in
            guard state.end == nil, state.current == index, let began = state.began else { return false }
            return state.wake.map { began + due < $0 } ?? true
        }
        if sooner { restartWatcher() }
    }

    private func restartWatcher() {
        let watcher = Task.immediate { await self.watch() }
        let previous = state.withLock { state -> Task<Void, Never>? in
            defer { state.watcher = state.end == nil ? watcher : nil }
            return state.watcher
        }
        previous?.cancel()
        if end != nil { watcher.cancel() }
    }

    /// Waits for the end.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { state -> Bool in
                if state.end != nil { return true }
                state.waiter = continuation
                return false
            }
            if ended { continuation.resume() }
        }
    }

    /// Ends the walk's turn with `outcome` for hook `index`, if that hook is still the one
    /// running (`nil`: whichever is).
    func abandon(_ index: Int?, _ outcome: HookOutcome<Value>) {
        let (waiter, watcher) = state.withLock { state in
            // Past the last hook the walk is finishing: nothing runs that could be cut short.
            guard state.end == nil, index == nil || index == state.current, state.current < hooks.count else {
                return (nil, nil) as (CheckedContinuation<Void, Never>?, Task<Void, Never>?)
            }
            state.end = .abandoned(index: state.current, outcome)
            return (state.waiter.take(), state.watcher.take())
        }
        watcher?.cancel()
        waiter?.resume()
    }

    /// Watches the deadline of whichever hook is running until the walk ends or this task is
    /// cancelled; asks for more time (`EXTEND_TIMEOUT_USEC=`) once per slow hook.
    private func watch() async {
        while true {
            let now = clock.now
            let next = state.withLock { state -> WatchStep in
                guard state.end == nil, let began = state.began, state.current < hooks.count else { return .stop }
                let budget = hooks.budget(hooks.steps[state.current])
                if now >= began + budget { return .overran(state.current, budget) }
                var wake = began + budget
                if let after = hooks.extendAfter, after < budget, state.extended != state.current {
                    if now >= began + after {
                        state.extended = state.current
                        // Ask for the rest of the budget plus a second of slack.
                        return .extend(budget - after + .seconds(1))
                    }
                    wake = began + after
                }
                state.wake = wake
                return .sleep(wake - now)
            }
            switch next {
            case .stop: return
            case .overran(let index, let budget):
                abandon(index, .overran(budget))
                return
            case .extend(let more): extend(more)
            case .sleep(let duration):
                do {
                    try await clock.sleep(for: duration)
                } catch {
                    return  // cancelled: the walk ended, or a sooner deadline has its own watcher
                }
            }
        }
    }
}

extension ListenerGroup.Core {
    /// How long a hook cut short by a second stop request (it is cancelled at once) may take to
    /// return before the mediator goes on without it (at most its budget); and the budget of
    /// each `terminate` hook after it.
    static let interruptionGrace = Duration.seconds(1)

    /// Waits until `task` ends or `limit` passes on the group's clock, whichever comes first.
    private func awaitEnd(of task: Task<Void, Never>, within limit: Duration) async {
        let waiter = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resume: @Sendable () -> Void = { waiter.withLock { $0.take() }?.resume() }
        var tasks: [Task<Void, Never>] = []
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiter.withLock { $0 = continuation }
            // Unstructured: a hook that ignores cancellation never ends, and a task group would
            // wait for it; these two race, and the one left behind is cancelled (or ends with the hook).
            tasks = [
                Task {
                    await task.value
                    resume()
                },
                Task { [clock] in
                    try? await clock.sleep(for: limit)
                    resume()
                },
            ]
        }
        tasks[1].cancel()
    }

    /// Calls the hooks of `hooks` in order, each within its budget, isolated from the mediator;
    /// returns the index of the first hook not called (`count` when every hook ran).
    ///
    /// Hooks are called inline in one task per event, so a hook that returns without
    /// suspending costs a call. A hook that hangs, even one that ignores cancellation, cannot
    /// wedge the mediator: when its budget runs out it is cancelled and abandoned and the
    /// mediator goes on with the next hook. That is the only reason for the unstructured tasks
    /// here: one walk per event (more only after an abandoned hook) and, once a hook suspends,
    /// a watcher for the rest of the event (a new one only when a later hook's deadline comes
    /// sooner).
    func runHooks<Step: Sendable, Value: Sendable>(_ hooks: HookSequence<Step, Value>) async -> Int {
        var next = 0
        while next < hooks.count {
            let first = next
            let walk = HookWalk(hooks, from: first, clock: clock) { [self] in
                send([.extendTimeout(microseconds: $0.microseconds)])
            }
            let task = Task.immediate { [abandoned] in
                await walk.walk(from: first)
                walk.taskEnded(counting: abandoned)
            }
            var end = walk.end
            if end == nil {
                if hooks.interruptible {
                    setInterruption { walk.abandon(nil, .interrupted) }
                }
                walk.startWatching()
                await walk.wait()
                if hooks.interruptible { setInterruption(nil) }
                end = walk.end
            }
            switch end {
            case .finished(let stoppedAt)?:
                return stoppedAt
            case .abandoned(let index, var outcome)?:
                task.cancel()
                if case .interrupted = outcome {
                    // Cut short by a second stop request: the hook hears the cancellation now and
                    // gets a moment to end what it started (a part killing its child processes)
                    // before the mediator goes on and the daemon exits. A hook that then returns
                    // did all it had to (a final checkpoint written in that moment): no failure.
                    // One that throws was cut short, whatever it says.
                    let budget = hooks.budget(hooks.steps[index])
                    await awaitEnd(
                        of: task,
                        within: hooks.interruptedKeepsItsBudget ? budget : min(budget, Self.interruptionGrace)
                    )
                    if let late = walk.lateOutcome, late.returned { outcome = late }
                }
                // Still running (it ignores cancellation): counted until it returns.
                walk.leave(counting: abandoned)
                let duration: Duration? = if case .overran(let budget) = outcome { budget } else { nil }
                guard hooks.settle(hooks.steps[index], outcome, duration) else { return index + 1 }
                next = index + 1
            case nil:
                preconditionFailure("a hook walk ended without an end")
            }
        }
        return next
    }
}

/// Hooks the mediator abandoned (over their budget, or cut short by a second stop request) that
/// still run: a hook that ignores cancellation goes on beside the listeners that stop after it,
/// and what it changes from then on may be lost. ``ListenerContext`` tells the listeners
/// (a state store keeps its unclean-shutdown marker then).
final class AbandonedHooks: Sendable {
    private let count = Mutex(0)

    /// How many abandoned hooks still run.
    var running: Int { count.withLock { $0 } }

    /// One more (`1`) or one fewer (`-1`): each walk counts itself once, under its own lock.
    func add(_ delta: Int) { count.withLock { $0 += delta } }
}
