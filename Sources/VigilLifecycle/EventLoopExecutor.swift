import CVigilEventLoop
import Synchronization

/// Runs a whole daemon on one thread: Swift concurrency's global and main executors are
/// replaced by an epoll loop on the calling thread, sleeps by one timerfd, and the
/// ``ListenerGroup``'s signals arrive through a signalfd on the same loop.
///
/// ```swift
/// // main.swift
/// exit(EventLoopExecutor.run { await daemon.run() })
/// ```
///
/// Why: on Linux the default executor is Dispatch's thread pool, and as soon as a Dispatch
/// worker thread has run, a pool monitor wakes the process once a second, forever; tasks hop
/// between threads; each thread's stack adds to the resident set. A lifecycle daemon does little
/// work and waits a lot: one thread, the shape of a C daemon's signalfd loop, idles with no
/// wake-ups at all and hands a signal to its listener without a thread switch.
///
/// The trade-off: everything shares one thread. A listener that computes for long or blocks in
/// a system call delays every other listener and the watchdog (which is then right to fire);
/// a hook that hangs without blocking the thread (awaiting forever) is still abandoned at the
/// end of its budget. Daemons with heavy work keep the default executor (just call `run()`),
/// or hand that work to threads of their own.
///
/// - Important: Call it once, first thing in `main`, before any task exists: it installs
///   process-wide runtime hooks and does not return until `body` has.
public enum EventLoopExecutor {
    /// Runs `body` as the first task on the loop and returns its result once it finishes.
    public static func run<Result: Sendable>(_ body: @escaping @Sendable () async -> Result) -> Result {
        precondition(
            cvigil_loop_install(),
            "EventLoopExecutor: another global executor hook is installed (SwiftNIO's, say); use one or the other."
        )
        let result = ResultBox<Result>()
        Task.detached {
            result.value = await body()
            cvigil_loop_stop()
        }
        let failed = cvigil_loop_run()
        precondition(failed == 0, "EventLoopExecutor: cannot set up epoll/eventfd/timerfd (errno \(failed))")
        guard let value = result.value else {
            preconditionFailure("EventLoopExecutor: the loop stopped before its body returned")
        }
        return value
    }

    /// True in a process whose executor is the event loop.
    public static var isInstalled: Bool { cvigil_loop_installed() }

    /// Suspends for `duration`; throws `CancellationError` at once when the task is cancelled.
    ///
    /// On the event loop this is one entry in the loop's timer heap that cancellation removes,
    /// so a cancelled sleep (a budget timer whose hook finished first, say) leaves no wake-up
    /// behind. `Task.sleep` would not do: in Swift 6.3 it goes to Dispatch whatever the
    /// executor, which starts Dispatch's worker pool and its once-a-second monitor. Without the
    /// event loop this is `Task.sleep(for:)`.
    public static func sleep(for duration: Duration) async throws {
        guard isInstalled else {
            try await Task.sleep(for: duration)
            return
        }
        let deadline = cvigil_loop_now() &+ max(duration, .zero).nanoseconds
        let sleeper = Sleeper()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                sleeper.start(continuation, deadline: deadline)
            }
        } onCancel: {
            sleeper.cancel()
        }
    }
}

/// One sleep on the loop's timer heap: whoever comes first, the timer or cancellation, resumes.
private final class Sleeper: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var timer: UInt64?
        var cancelled = false
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<Void, any Error>, deadline: UInt64) {
        let cancelled = state.withLock { state -> Bool in
            if state.cancelled { return true }
            state.continuation = continuation
            return false
        }
        if cancelled {
            continuation.resume(throwing: CancellationError())
            return
        }
        // The heap holds a retain until the timer fires or is cancelled.
        let context = Unmanaged.passRetained(self).toOpaque()
        let id = cvigil_loop_add_timer(
            deadline,
            { context in
                let sleeper = Unmanaged<Sleeper>.fromOpaque(context!).takeRetainedValue()
                sleeper.state.withLock { $0.continuation.take() }?.resume()
            },
            context
        )
        let cancelledMeanwhile = state.withLock { state -> Bool in
            state.timer = id
            return state.cancelled
        }
        if cancelledMeanwhile { cancel() }
    }

    func cancel() {
        let (continuation, timer) = state.withLock { state in
            state.cancelled = true
            return (state.continuation.take(), state.timer)
        }
        guard let continuation else { return }
        if let timer, cvigil_loop_cancel_timer(timer) {
            Unmanaged.passUnretained(self).release()
        }
        continuation.resume(throwing: CancellationError())
    }
}

/// Written by the body's task and read after the loop returned, on the same thread.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
