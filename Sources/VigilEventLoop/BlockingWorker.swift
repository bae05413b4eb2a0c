import CVigilEventLoop
import Synchronization
import VigilPOSIX
import VigilPlatform

/// Runs a blocking call (an `open`, `stat` or `read` on a file system that may hang) on a
/// helper thread, and waits for it with a deadline without blocking the caller's thread.
///
/// A read from a hung file system (a FUSE daemon that never answers, an NFS hard mount) blocks
/// its thread for good, and vigild has one thread: the event loop. So the configuration and the
/// state file are read here, and a call that misses its deadline is abandoned: the caller hears
/// ``Outcome/timedOut`` and goes on answering signals and the watchdog.
///
/// Cost: one long-lived thread, handed each call through a semaphore (a futex wake), not a
/// thread per call (tens of microseconds); the caller waits in place for up to
/// ``defaultWaitInPlace`` before it suspends (spinning while the call is on its way or runs on
/// another processor, then asleep: `Call.waitEarly(for:)`), so a quick read costs no suspension
/// and no turn of the event loop. A thread is made only when none is idle: at the first call
/// (or ahead of it, ``startThread()``), and after one hung. The thread is made with every signal
/// blocked but those of a crash, so that a signal sent to the process is never taken on it.
///
/// A thread blocked in the kernel cannot be cancelled, so a thread whose call missed its
/// deadline is leaked: it ends by itself if the call ever returns. At most
/// ``maximumThreads`` threads may be stuck so; with that many stuck a call is refused at once
/// with ``Outcome/unavailable(_:)``, so a file system that stays hung costs a few stacks, not a
/// thread per reload. Calls made while another runs in time get threads of their own; once
/// they return, at most ``maximumThreads`` stay idle for the next calls and the others end.
package final class BlockingWorker: Sendable {
    /// How a call ended.
    package enum Outcome<Value: Sendable>: Sendable {
        /// The call returned this, in time.
        case finished(Value)
        /// The call did not return before the deadline; it was abandoned on its thread.
        case timedOut
        /// The task waiting for it was cancelled first; the call was abandoned.
        case cancelled
        /// No thread could run it; the reason says why (every thread is stuck in an earlier
        /// call, or `pthread_create` failed).
        case unavailable(String)
    }

    /// The process's worker: what the configuration and persistence listeners use.
    package static let shared = BlockingWorker(maximumThreads: 4)

    /// How long a caller's thread waits for the answer in place, by default, before it suspends:
    /// long enough for a file call that runs at once on another processor (locking the runtime
    /// and state directories took 200–280 µs from the hand-over), short enough that the event
    /// loop is not held up.
    package static let defaultWaitInPlace = Duration.microseconds(400)

    /// How many threads may be stuck in abandoned calls at once before calls are refused.
    package let maximumThreads: Int

    private struct State {
        /// Threads waiting for a call.
        var idle: [WorkerThread] = []
        /// Every thread alive: idle, running a call in time, or stuck in an abandoned call.
        var threads = 0
        /// Threads whose call was abandoned and has not returned yet.
        var stuck = 0
    }

    private let state = Mutex(State())

    package init(maximumThreads: Int) {
        self.maximumThreads = max(1, maximumThreads)
    }

    /// Threads stuck in abandoned calls (tests and status).
    package var stuckThreads: Int { state.withLock { $0.stuck } }

    /// Threads alive.
    package var threadCount: Int { state.withLock { $0.threads } }

    /// Runs `work` on a helper thread; returns what it returned, or ``Outcome/timedOut`` once
    /// `deadline` has passed without an answer (the thread is then left to its call).
    ///
    /// The deadline is a timer on the event loop when it runs (``EventLoopExecutor``), else a
    /// sleeping task.
    ///
    /// - Parameters:
    ///   - waitInPlace: how long the caller's thread waits for the answer before it suspends
    ///     (``defaultWaitInPlace``; spinning while the call is on its way or runs on another
    ///     processor, then asleep). A caller with nothing else to do meanwhile (the final
    ///     checkpoint at stop) may wait longer: a suspension costs a wake-up of the caller's
    ///     thread when the answer comes, which on an idle virtual CPU is 50–150 µs.
    ///   - last: the daemon's last call (the final checkpoint): the thread ends once it has
    ///     answered, while it is awake, instead of sleeping until the process's exit wakes it
    ///     (the exit waits for every thread). A later call starts a new thread.
    ///   - cancellable: `false` waits for the answer (within `deadline`) even when the calling
    ///     task is cancelled meanwhile: the final checkpoint, which a second stop request cuts
    ///     short but whose few milliseconds decide whether the stop was clean.
    package func run<Value: Sendable>(
        deadline: Duration,
        waitInPlace: Duration = BlockingWorker.defaultWaitInPlace,
        last: Bool = false,
        cancellable: Bool = true,
        _ work: @escaping @Sendable () -> Value
    ) async -> Outcome<Value> {
        // The value travels in a slot of its own: what waits for the thread is not generic, so
        // the wait in place and the hand-over look up no generic metadata (unspecialized across
        // modules, each look-up of `Call<Value>`'s types was a hash-table search: ~200 of them
        // in a stop's final checkpoint, a quarter of the stop's instructions).
        let slot = ResultSlot<Value>()
        switch await run(
            deadline: deadline,
            waitInPlace: waitInPlace,
            last: last,
            cancellable: cancellable,
            { slot.value = work() }
        ) {
        case .finished:
            guard let value = slot.value else { preconditionFailure("a call finished without its value") }
            return .finished(value)
        case .timedOut: return .timedOut
        case .cancelled: return .cancelled
        case .unavailable(let reason): return .unavailable(reason)
        }
    }

    /// ``run(deadline:waitInPlace:last:cancellable:_:)`` for a call that keeps its own result.
    private func run(
        deadline: Duration,
        waitInPlace: Duration,
        last: Bool,
        cancellable: Bool,
        _ work: @escaping @Sendable () -> Void
    ) async -> Outcome<Void> {
        let thread: WorkerThread
        switch takeThread() {
        case .success(let taken): thread = taken
        case .failure(let refusal): return .unavailable(refusal.reason)
        }
        let call = Call(worker: self)
        thread.hand {
            call.started()
            work()
            return call.finish(thread: thread, last: last)
        }
        // Most calls (a file on a local disk) answer in tens of microseconds: waiting for them
        // here spares the caller a suspension and a turn of the event loop.
        let began = MonotonicClock.nanoseconds()
        if let outcome = call.waitEarly(for: min(waitInPlace, deadline)) { return outcome }
        let left = deadline - .nanoseconds(Int64(MonotonicClock.nanoseconds() &- began))
        guard cancellable else {
            return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome<Void>, Never>) in
                call.begin(continuation, deadline: left)
            }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome<Void>, Never>) in
                call.begin(continuation, deadline: left)
            }
        } onCancel: {
            call.expire(.cancelled)
        }
    }

    private struct Refusal: Error { var reason: String }

    private func takeThread() -> Result<WorkerThread, Refusal> {
        let taken = state.withLock { state -> WorkerThread?? in
            if let thread = state.idle.popLast() { return .some(thread) }
            // Only stuck threads are bounded: a busy one returns soon, and a second call made
            // while it runs (two listeners, or tests run in parallel) gets a thread of its own.
            guard state.stuck < maximumThreads else { return .none }
            state.threads += 1
            return .some(nil)
        }
        switch taken {
        case .some(.some(let thread)): return .success(thread)
        case .none:
            let stuck = stuckThreads
            return .failure(
                Refusal(
                    reason: "\(stuck) helper threads are stuck in earlier calls that missed their deadline and "
                        + "have not returned (a hung file system?); no more are started"
                )
            )
        case .some(.none):
            return startCounted().mapError { Refusal(reason: "cannot start a thread to run it: \($0.reason)") }
        }
    }

    /// Starts a thread already counted in `threads`; uncounts it when it cannot start.
    private func startCounted() -> Result<WorkerThread, Refusal> {
        let thread = WorkerThread()
        if let failure = thread.start() {
            state.withLock { $0.threads -= 1 }
            return .failure(Refusal(reason: failure))
        }
        return .success(thread)
    }

    /// Starts a thread ahead of the first call, when no thread is alive: a daemon calls it as it
    /// begins to start, so that the thread's creation (tens of microseconds, and the wake-up of
    /// another processor) overlaps the daemon's own start-up work instead of delaying its first
    /// file call. Does nothing when a thread is alive, or when one cannot be started (the first
    /// call then tries again and reports why).
    package func startThread() {
        // A stop that retires idle threads between the count and the append below leaves this
        // one idle until the exit ends it: counted right, and only on a daemon stopping as it
        // starts (vigild calls both on its one thread, in order).
        let start = state.withLock { state -> Bool in
            guard state.threads == 0 else { return false }
            state.threads += 1
            return true
        }
        guard start, case .success(let thread) = startCounted() else { return }
        state.withLock { $0.idle.append(thread) }
    }

    /// Ends the threads that wait for a call (not those stuck in one), without waiting for
    /// them: a daemon calls it when it has stopped, so that they are gone by the time the
    /// process exits instead of being woken on another CPU by the exit itself, which then waits
    /// for them (the parent and systemd hear of the exit only once every thread has ended). A
    /// later call starts a new thread.
    package func retireIdleThreads() {
        let idle = state.withLock { state -> [WorkerThread] in
            defer { state.idle.removeAll() }
            state.threads -= state.idle.count
            return state.idle
        }
        for thread in idle { thread.hand { false } }
    }

    /// How long a waiting caller spins for a call that has not begun (its thread is being
    /// woken, on this processor or another) before it sleeps. Short: a thread woken onto the
    /// caller's own processor cannot begin while the caller spins, and on the 2-CPU machines
    /// measured it often is (30 µs against 100 µs, alternating binaries in four runs: a stop
    /// 200–270 µs shorter, a start 150–320 µs; 10 µs was slower than 30).
    package static let spinStartLimit: UInt64 = 30_000

    /// How long a waiting caller spins for a call that runs on another processor, from when
    /// it saw it begin, before it sleeps: a call blocked in the kernel (a slow `fsync`) is then
    /// waited for asleep.
    package static let spinRunLimit: UInt64 = 300_000

    /// Whether a caller that has waited `elapsed` nanoseconds spins on (else it sleeps): while
    /// the call has not begun, up to ``spinStartLimit`` (its thread is on its way); once it runs on
    /// another processor (`on`, seen at `began`), up to ``spinRunLimit`` more, since it will answer
    /// soon unless it blocks in the kernel; not at all once it runs on the caller's processor
    /// (`caller`), where a spin only keeps it from running. Never past `limit`. A processor of
    /// -1 (`sched_getcpu` failed) counts as another one.
    package static func spinsOn(elapsed: UInt64, began: UInt64?, on: Int32?, caller: Int32, limit: UInt64) -> Bool {
        guard elapsed < limit else { return false }
        guard let began, let on else { return elapsed < spinStartLimit }
        if on == caller && caller >= 0 { return false }
        return elapsed &- began < spinRunLimit
    }

    /// A call returned in time: its thread waits for the next one, unless the call was the
    /// `last` or ``maximumThreads`` already wait (many calls at once made a thread each): then
    /// it ends, uncounted here, and `false` says so.
    fileprivate func returned(_ thread: WorkerThread, last: Bool) -> Bool {
        state.withLock { state in
            guard !last, state.idle.count < maximumThreads else {
                state.threads -= 1
                return false
            }
            state.idle.append(thread)
            return true
        }
    }

    /// A call missed its deadline: its thread is stuck until the call returns.
    fileprivate func abandoned() {
        state.withLock { $0.stuck += 1 }
    }

    /// An abandoned call returned at last: its thread ends.
    fileprivate func stuckThreadEnded() {
        state.withLock {
            $0.stuck -= 1
            $0.threads -= 1
        }
    }
}

/// Where a call's value waits for its caller: written on the thread before the call is
/// finished (under `Call`'s lock), read by the caller only after it heard so.
private final class ResultSlot<Value: Sendable>: @unchecked Sendable {
    var value: Value?
}

/// One call: whoever comes first, the thread's answer or the deadline, resumes the caller.
///
/// `@unchecked`: the state is behind its mutex, and `arrived` is a semaphore (thread-safe by
/// itself) that lives as long as the call.
private final class Call: @unchecked Sendable {
    private struct State {
        var continuation: CheckedContinuation<BlockingWorker.Outcome<Void>, Never>?
        var timer: (id: UInt64, target: TimerTarget)?
        var timerTask: Task<Void, Never>?
        var ended = false
        /// How the call ended when it ended before ``begin(_:deadline:)``.
        var early: BlockingWorker.Outcome<Void>?
    }

    private let state = Mutex(State())
    private let worker: BlockingWorker
    /// The processor the call began on (`sched_getcpu`), ``notStarted`` before; written once by
    /// the thread, read by the spinning caller.
    private let startedOn = Atomic<Int32>(Call.notStarted)
    /// ``startedOn`` before the call begins.
    private static let notStarted = Int32.min
    /// Posted when the call ends before the caller suspended (``waitEarly(for:)`` sleeps on it).
    private let arrived = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(worker: BlockingWorker) {
        self.worker = worker
        sem_init(arrived, 0, 0)
    }

    deinit {
        sem_destroy(arrived)
        arrived.deallocate()
    }

    /// Whether this process may run on more than one processor (read once): with one, a spin
    /// only keeps the call's thread from running.
    static let processors = cvigil_allowed_processors()

    /// On the thread: the call begins.
    func started() {
        startedOn.store(cvigil_current_processor(), ordering: .relaxed)
    }

    /// Waits up to `limit` for the call to end before the caller suspends; its outcome if it
    /// did. It spins first, when the process has more than one processor, without
    /// `sched_yield()`: a call on another processor is heard at once, with no wake-up of this
    /// thread (on a 2-CPU virtual machine, waking a sleeping thread on an idle processor took
    /// 50–150 µs: vigild's start was ~300 µs slower when it slept at once). See
    /// ``BlockingWorker/spinsOn(elapsed:began:on:caller:limit:)`` for how long. Then it sleeps on the call's
    /// semaphore: a yield hands the processor to any runnable task for as long as that task
    /// runs (4 ms once at stop, under perf).
    func waitEarly(for limit: Duration) -> BlockingWorker.Outcome<Void>? {
        let began = MonotonicClock.nanoseconds()
        let total = max(limit, .zero).nanoseconds
        if Self.processors > 1 {
            let caller = cvigil_current_processor()
            var seen: (at: UInt64, on: Int32)?
            while true {
                if let early = endedEarly { return early }
                let elapsed = MonotonicClock.nanoseconds() &- began
                if seen == nil {
                    let on = startedOn.load(ordering: .relaxed)
                    if on != Self.notStarted { seen = (elapsed, on) }
                }
                guard
                    BlockingWorker.spinsOn(
                        elapsed: elapsed,
                        began: seen?.at,
                        on: seen?.on,
                        caller: caller,
                        limit: total
                    )
                else { break }
                cvigil_processor_pause()
            }
        }
        if let early = endedEarly { return early }
        let left = total &- min(total, MonotonicClock.nanoseconds() &- began)
        guard left > 0 else { return nil }
        _ = cvigil_semaphore_wait_until(arrived, MonotonicClock.nanoseconds() &+ left)
        return endedEarly
    }

    func begin(_ continuation: CheckedContinuation<BlockingWorker.Outcome<Void>, Never>, deadline: Duration) {
        // The caller may have been cancelled before the call began: it hears so at once.
        let early = state.withLock { state -> BlockingWorker.Outcome<Void>? in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early {
            continuation.resume(returning: early)
            return
        }
        if EventLoopExecutor.isInstalled {
            // The loop's timer heap holds a retain until the timer fires or is cancelled.
            let target = TimerTarget { [self] in expire(.timedOut) }
            let context = Unmanaged.passRetained(target).toOpaque()
            let due = MonotonicClock.nanoseconds() &+ max(deadline, .zero).nanoseconds
            let id = cvigil_loop_add_timer(
                due,
                { context in
                    guard let context else { return }
                    Unmanaged<TimerTarget>.fromOpaque(context).takeRetainedValue().fire()
                },
                context
            )
            let ended = state.withLock { state -> Bool in
                if !state.ended { state.timer = (id, target) }
                return state.ended
            }
            if ended { TimerTarget.cancel(id, target) }
        } else {
            // A task, because nothing else wakes this process at the deadline without the loop.
            let task = Task { [self] in
                try? await Task.sleep(for: deadline)
                if !Task.isCancelled { expire(.timedOut) }
            }
            let ended = state.withLock { state -> Bool in
                if !state.ended { state.timerTask = task }
                return state.ended
            }
            if ended { task.cancel() }
        }
    }

    /// The outcome when the call ended before the caller suspended (it answered while the
    /// caller waited in place, or the caller was cancelled), else `nil`.
    var endedEarly: BlockingWorker.Outcome<Void>? { state.withLock { $0.early } }

    /// On the thread: the call returned. Returns whether the thread goes on serving calls.
    func finish(thread: WorkerThread, last: Bool) -> Bool {
        let (abandoned, serves, continuation, timer, task) = state.withLock { state in
            guard !state.ended else {
                return (true, false, nil, nil, nil)
                    as (
                        Bool, Bool, CheckedContinuation<BlockingWorker.Outcome<Void>, Never>?,
                        (id: UInt64, target: TimerTarget)?, Task<Void, Never>?
                    )
            }
            state.ended = true
            // The caller waits in place (or is about to suspend: `begin` hands it this).
            if state.continuation == nil { state.early = .finished(()) }
            // Idle again before the caller hears: its next call finds this thread (unless it
            // was the last call, or enough threads wait already: the thread ends).
            let serves = worker.returned(thread, last: last)
            return (false, serves, state.continuation.take(), state.timer.take(), state.timerTask.take())
        }
        if abandoned {
            // Abandoned: the caller heard of the deadline and a new thread took this one's place.
            worker.stuckThreadEnded()
            return false
        }
        if let timer { TimerTarget.cancel(timer.id, timer.target) }
        task?.cancel()
        if let continuation {
            continuation.resume(returning: .finished(()))
        } else {
            sem_post(arrived)
        }
        return serves
    }

    /// The deadline passed or the caller was cancelled first: the caller hears `outcome` and
    /// the thread is abandoned to its call.
    func expire(_ outcome: BlockingWorker.Outcome<Void>) {
        let (won, continuation, timer, task) = state.withLock { state in
            guard !state.ended else {
                return (false, nil, nil, nil)
                    as (
                        Bool, CheckedContinuation<BlockingWorker.Outcome<Void>, Never>?,
                        (id: UInt64, target: TimerTarget)?, Task<Void, Never>?
                    )
            }
            state.ended = true
            if state.continuation == nil { state.early = outcome }
            return (true, state.continuation.take(), state.timer.take(), state.timerTask.take())
        }
        guard won else { return }
        worker.abandoned()
        if let timer { TimerTarget.cancel(timer.id, timer.target) }
        task?.cancel()
        continuation?.resume(returning: outcome)
    }
}

/// What a deadline on the loop's timer heap calls; the heap holds a retain of it until the timer
/// fires or is cancelled.
private final class TimerTarget: Sendable {
    let fire: @Sendable () -> Void

    init(_ fire: @escaping @Sendable () -> Void) { self.fire = fire }

    /// Removes the timer if it has not fired, and the heap's retain with it.
    static func cancel(_ id: UInt64, _ target: TimerTarget) {
        if cvigil_loop_cancel_timer(id) { Unmanaged.passUnretained(target).release() }
    }
}

/// A detached pthread that runs handed calls one at a time, sleeping on a semaphore between.
private final class WorkerThread: @unchecked Sendable {
    // The semaphore and the slot are shared with the thread; the slot is guarded by the mutex.
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    /// The next call; it returns whether the thread goes on serving calls.
    private let slot = Mutex<(@Sendable () -> Bool)?>(nil)

    init() {
        sem_init(semaphore, 0, 0)
    }

    /// Starts the thread (born with the signals blocked: `SystemThread`); returns the reason
    /// when it cannot.
    func start() -> String? {
        do {
            try SystemThread.startDetached { self.serve() }
            return nil
        } catch {
            return "pthread_create: \(SystemError.describe(error.errno))"
        }
    }

    /// Gives the thread its next call.
    func hand(_ call: @escaping @Sendable () -> Bool) {
        slot.withLock { $0 = call }
        sem_post(semaphore)
    }

    private func serve() {
        while true {
            // Retried on EINTR (the thread takes SIGPROF and the fault signals); no other
            // failure is possible on a semaphore this thread initialised.
            guard SystemCall.retrying32(.semaphoreWait, .unspecified, { sem_wait(semaphore) }) == 0 else { continue }
            guard let call = slot.withLock({ $0.take() }) else { continue }
            if !call() { return }
        }
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }
}
