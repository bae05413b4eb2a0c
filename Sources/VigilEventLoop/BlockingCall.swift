import VigilPOSIX
import VigilPlatform

extension EventLoopExecutor {
    /// Runs `work` — a call that may block for good: an `open`, `stat`, `readdir` or `read` on a
    /// file system that may hang (an NFS hard mount, a FUSE daemon that never answers) — on a
    /// helper thread, and waits for it with a deadline without holding the caller's thread.
    ///
    /// ```swift
    /// let count = try await EventLoopExecutor.runBlocking(
    ///     operation: "count the files in", path: directory, within: .seconds(5)
    /// ) { try countFiles(in: directory) }
    /// ```
    ///
    /// It is what the standard configuration and persistence listeners do with their files: the
    /// daemon's one thread (the event loop) goes on answering signals, reloads and the watchdog
    /// while the call runs, and a call that misses its deadline is abandoned on its thread (a
    /// thread blocked in the kernel cannot be cancelled; it ends if the call ever returns). At
    /// most four helper threads may be stuck so in the process; past that, calls are refused at
    /// once. These threads are the daemon's own, apart from the standard listeners': calls of
    /// yours stuck on a hung mount never starve their configuration reads and state checkpoints.
    /// A quick call costs a hand-over to a long-lived thread (a futex wake), not a thread.
    /// Works without the event loop too (the deadline is then a sleeping task).
    ///
    /// - Parameters:
    ///   - operation: what `work` does, as a verb that reads after "cannot" (`read`, `count the
    ///     files in`), for the error.
    ///   - path: what it does it to, for the error.
    ///   - deadline: how long to wait for the answer.
    ///   - work: the call; it runs on another thread, so it must not touch the caller's state
    ///     without a lock.
    /// - Returns: what `work` returned.
    /// - Throws: what `work` threw; `CancellationError` when the waiting task was cancelled (the
    ///   call is abandoned; in a task cancelled before the call, `work` is not run: a part cut
    ///   short at stop that must still write something calls from a task of its own,
    ///   `try await Task { try await EventLoopExecutor.runBlocking(…) }.value`); a ``VigilPOSIX/SystemError`` with `ETIMEDOUT` when no answer came
    ///   within `deadline` ("cannot count the files in /srv/data: no answer within 5 s (a hung
    ///   file system?); the call was abandoned on its helper thread"), or with `EAGAIN` when no
    ///   helper thread could take the call (every one is stuck in an earlier call, or none could
    ///   be made).
    public static func runBlocking<Value: Sendable>(
        operation: String,
        path: String,
        within deadline: Duration,
        _ work: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        switch await BlockingWorker.daemonCalls.run(deadline: deadline, { Result { try work() } }) {
        case .finished(let result):
            return try result.get()
        case .timedOut:
            throw SystemError(
                path: path,
                operation: operation,
                errno: ETIMEDOUT,
                detail:
                    "no answer within \(deadline.formatted) (a hung file system?); the call was abandoned on its helper thread"
            )
        case .cancelled:
            throw CancellationError()
        case .unavailable(let reason):
            throw SystemError(path: path, operation: operation, errno: EAGAIN, detail: "it was not run: \(reason)")
        }
    }
}

extension BlockingWorker {
    /// The worker of ``EventLoopExecutor/runBlocking(operation:path:within:_:)``: the daemon's
    /// own calls, apart from ``shared`` (the standard listeners' file work), so that calls that
    /// hang in one never use up the other's threads.
    package static let daemonCalls = BlockingWorker(maximumThreads: 4)

    /// Ends both workers' idle threads (``retireIdleThreads()``): a daemon that has stopped.
    package static func retireAllIdleThreads() {
        shared.retireIdleThreads()
        daemonCalls.retireIdleThreads()
    }
}

extension Duration {
    /// `1.5 s`, `250 ms`, `40 µs`: compact, for messages.
    package var formatted: String {
        // A negative budget read "0 µs" (helper 54).
        if self < .zero { return "-" + (Duration.zero - self).formatted }
        let (seconds, attoseconds) = components
        if seconds >= 1 {
            let tenths = attoseconds / 100_000_000_000_000_000
            return tenths == 0 ? "\(seconds) s" : "\(seconds).\(tenths) s"
        }
        let micros = attoseconds / 1_000_000_000_000
        return micros >= 1000 ? "\(micros / 1000) ms" : "\(micros) µs"
    }
}
