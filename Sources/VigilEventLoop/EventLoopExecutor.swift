// VigilEventLoop: Vigil's single-threaded executor for daemons, and the few things that must
// know whether it runs (sleeping, signal delivery, the monotonic clock).
//
// How it takes over: Swift 6.3's concurrency runtime exports hook variables
// (`swift_task_enqueueGlobal_hook` and friends) through which a process may redirect jobs;
// CVigilEventLoop claims the one that is live (the global enqueue) with a compare-and-swap from
// `NULL`, as SwiftNIO 2.101's
// `NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor` does,
// and only on a toolchain whose hooks have been checked (see `takesOverOnThisToolchain`). On any
// other toolchain `run` keeps the default executor: slower to idle, but correct.
//
// What would replace the hook: Swift 6.3 ships, as `@_spi(ExperimentalCustomExecutors)`, the
// `ExecutorFactory` protocol (its `mainExecutor: any MainExecutor` and `defaultExecutor: any
// TaskExecutor` become the process's executors, picked up by the runtime from the program's
// entry point) and `RunLoopExecutor` (`run()`, `runUntil(_:)`, `stop()`, which `MainExecutor`
// refines), and as `@_spi(ExperimentalScheduling)` `SchedulingExecutor` (`enqueue(_:after:
// tolerance:clock:)`). Once they are public, this loop becomes the `MainExecutor` (run by
// `EventLoopExecutor.run`) and a `TaskExecutor & SchedulingExecutor` returned by a factory: no
// hook variable, no compare-and-swap, no toolchain guard, main-actor jobs without Dispatch's
// main queue, and `Task.sleep` on the loop's timers, so that `EventLoopExecutor.sleep` can
// become `Task.sleep`.

import CVigilEventLoop
@preconcurrency import Dispatch
import Synchronization
import VigilPOSIX
import VigilPlatform

/// Runs a whole daemon on one thread: Swift concurrency's global executor is replaced by an
/// epoll loop on the calling thread (which also drains the main actor's queue), sleeps by one
/// timerfd, and the daemon's signals arrive through a signalfd on the same loop.
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
/// Sleeping: use ``sleep(for:)``. `Task.sleep` does not reach the loop in Swift 6.3: the
/// runtime hands it to Dispatch's timer without calling the delay or deadline hooks, which
/// starts Dispatch's threads and their once-a-second monitor (the `task-sleep` scenario of
/// Tests/VigilEventLoopTests shows it). So the loop installs only the global enqueue hook (the
/// main-executor hook is not called either: main-actor jobs go to Dispatch's main queue, which
/// the loop drains on its thread).
///
/// - Important: Call it once, from the main thread, first thing in `main`, before any task
///   exists: it installs a process-wide runtime hook and does not return until `body` has.
public enum EventLoopExecutor {
    /// Whether this toolchain's runtime hooks are the ones the loop was written against (their
    /// names, and the Swift calling convention of a hook that receives the job and the original
    /// function), which have not changed from 6.1 to 6.3 (tested on 6.3.1). A later toolchain
    /// keeps the default executor until checked, as SwiftNIO guards its own takeover with
    /// `#if compiler(<6.6)`.
    static var takesOverOnThisToolchain: Bool {
        #if compiler(>=6.1) && compiler(<6.4)
            return true
        #else
            return false
        #endif
    }

    /// Runs `body` as the first task on the loop and returns its result once it finishes.
    ///
    /// On a toolchain the loop does not know, `body` runs on the default executor instead and
    /// `isInstalled` stays `false` (sleeps and signals then take their default paths).
    public static func run<Result: Sendable>(_ body: @escaping @Sendable () async -> Result) -> Result {
        run(takingOver: takesOverOnThisToolchain, body)
    }

    /// ``run(_:)``, with the takeover decided by the caller (the tests run both paths).
    package static func run<Result: Sendable>(
        takingOver: Bool,
        _ body: @escaping @Sendable () async -> Result
    ) -> Result {
        let result = ResultBox<Result>()
        guard takingOver else {
            let finished = DispatchSemaphore(value: 0)
            Task.detached {
                result.value = await body()
                finished.signal()
            }
            finished.wait()
            return result.take()
        }
        precondition(
            cvigil_loop_install(),
            "EventLoopExecutor: another library has installed a global executor hook (SwiftNIO's "
                + "singleton takeover, say): run the daemon on one executor or the other, not both."
        )
        Task.detached {
            result.value = await body()
            cvigil_loop_stop()
        }
        let failed = cvigil_loop_run()
        if failed != 0 {
            // No job has run: nothing to stop but the process. One line on stderr (the journal
            // under systemd) and exit status 1, never a trap.
            let what = cvigil_loop_failed_descriptor().map { String(cString: $0) } ?? "descriptors"
            writeToStandardError(startFailure(opening: what, errno: failed))
            exit(1)
        }
        return result.take()
    }

    /// The line for a loop that could not get its descriptors: the errno by name, what was being
    /// opened, and for `EMFILE` the limit and the unit setting that raises it.
    package static func startFailure(opening what: String, errno code: Int32) -> String {
        let program = CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
        var line =
            "\(program.isEmpty ? "daemon" : program): cannot start: the event loop cannot open its \(what): "
            + describe(code)
        if code == EMFILE {
            var limit = rlimit()
            let soft =
                getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? "\(limit.rlim_cur)" : "too few"
            line +=
                ". The process may have \(soft) descriptors open (RLIMIT_NOFILE); the loop needs "
                + "\(loopDescriptors) besides stdin, stdout and stderr, and a daemon like vigild at least "
                + "\(minimumDescriptorLimit) in all: raise LimitNOFILE= in the unit (or ulimit -n)"
        } else if code == ENFILE {
            line += ". The whole system is out of descriptors (fs.file-max); try again when it is not"
        }
        // `<3>`: an error for journald, which reads the prefix from a service's stream.
        return (getenv("JOURNAL_STREAM") != nil ? "<3>" : "") + line + "\n"
    }

    /// Descriptors the loop holds: epoll, a timerfd (its sleeps, and how other threads wake it),
    /// one signalfd for every signal, Dispatch's main-queue eventfd.
    package static let loopDescriptors = 4

    /// The smallest `RLIMIT_NOFILE` (`LimitNOFILE=`) vigild starts, reloads and stops with under
    /// systemd: stdin, stdout, stderr, the loop's four, the notify and journal sockets, the
    /// runtime directory, one for the file being read or written, the instance locks of the
    /// runtime and state directories, and `BARRIER=1`'s socket pair at exit (measured: see the
    /// README's failure-mode table).
    package static let minimumDescriptorLimit = 14

    /// The errno's symbolic name and the OS's words: "EMFILE (Too many open files)".
    package static func describe(_ code: Int32) -> String {
        let names: [Int32: String] = [
            EMFILE: "EMFILE", ENFILE: "ENFILE", ENOMEM: "ENOMEM", EPERM: "EPERM", EACCES: "EACCES",
            ENOSYS: "ENOSYS", EINVAL: "EINVAL", EAGAIN: "EAGAIN",
        ]
        let words = String(cString: strerror(code))
        return names[code].map { "\(words) (\($0))" } ?? "\(words) (errno \(code))"
    }

    private static func writeToStandardError(_ text: String) {
        SystemCall.writeAll(text, to: 2)
    }

    /// How many signals the loop took and discarded because nobody owned them: real-time
    /// signals blocked when the loop started (all of them under `VigilEarlySignals`), which
    /// would otherwise stay queued, each charged to a user's `RLIMIT_SIGPENDING`, for as
    /// long as the process lives. 0 without the loop.
    package static var discardedSignals: UInt64 { cvigil_loop_discarded_signals() }

    /// Opens `/dev/null` on each of descriptors 0, 1 and 2 that is closed, so that no descriptor
    /// opened later becomes stdin, stdout or stderr and takes the log lines. The loop does it
    /// first thing (and `VigilEarlySignals` before the Swift runtime starts); `Daemon` calls it
    /// for a daemon on the default executor.
    package static func openMissingStandardDescriptors() { cvigil_loop_open_standard_descriptors() }

    /// True in a process whose executor is the event loop.
    package static var isInstalled: Bool { cvigil_loop_installed() }

    /// Suspends for `duration`; throws `CancellationError` at once when the task is cancelled.
    ///
    /// On the event loop this is one entry in the loop's timer heap that cancellation removes,
    /// so a cancelled sleep (a budget timer whose hook finished first, say) leaves no wake-up
    /// behind. `Task.sleep` would not do: in Swift 6.3 it goes to Dispatch whatever the
    /// executor (see the type's documentation). Without the event loop this is
    /// `Task.sleep(for:)`.
    ///
    /// A duration beyond a century sleeps a century (for ever, to a daemon), as the loop's
    /// timer saturates: `Task.sleep` traps on one whose nanoseconds overflow 64 bits (a
    /// listener budget of `.seconds(Int64.max)`, say).
    public static func sleep(for duration: Duration) async throws {
        guard isInstalled else {
            try await Task.sleep(for: min(max(duration, .zero), .seconds(100 * 365 * 86_400)))
            return
        }
        let deadline = MonotonicClock.nanoseconds() &+ max(duration, .zero).nanoseconds
        let sleeper = Sleeper()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                sleeper.start(continuation, deadline: deadline)
            }
        } onCancel: {
            sleeper.cancel()
        }
    }

    /// How many sleeps wait on the loop's timer heap (0 when the loop is not installed).
    package static var pendingTimers: Int { cvigil_loop_pending_timers() }
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
                guard let context else { return }
                let sleeper = Unmanaged<Sleeper>.fromOpaque(context).takeRetainedValue()
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

/// Written by the body's task and read after the loop (or the semaphore) returned.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?

    func take() -> Value {
        guard let value else {
            preconditionFailure("EventLoopExecutor: the loop stopped before its body returned")
        }
        return value
    }
}
