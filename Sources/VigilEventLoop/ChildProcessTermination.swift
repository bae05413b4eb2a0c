import VigilPOSIX
import VigilPlatform

// The event loop's part of VigilPOSIX's ChildProcess: the wait that holds no thread. It lives
// here, where the loop is known, so that the system-call layer below depends on nothing.
extension ChildProcess {
    /// Waits until the child ends and reaps it, holding no thread meanwhile (see the type's
    /// documentation): a pidfd watched by the event loop's epoll, or by a `poll` thread of its
    /// own when `EventLoopExecutor` does not run the process.
    ///
    /// In a task that was cancelled, every call throws `CancellationError` at once unless the
    /// child has ended already. To reap a child there (a part cut short at its terminate budget,
    /// say), signal it and wait in a task of its own, which the cancellation does not reach:
    ///
    /// ```swift
    /// try? job.send(SIGKILL, toProcessGroup: true)
    /// let ended = try await Task { try await job.termination() }.value
    /// ```
    ///
    /// It may be awaited by several tasks at once, and again later: the child is reaped once,
    /// and each wait answers how it ended.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first (the child runs on and is
    ///   not reaped: signal it and wait again, as above); `SystemError` when something else
    ///   reaped the child (`ECHILD`: a `waitpid` of the daemon's own), the kernel has no pidfds
    ///   (`ENOSYS`: Linux before 5.3), or no descriptor is left to watch it (`EMFILE`).
    ///
    /// The corresponding C functions are `pidfd_open` and `waitpid`.
    public func termination() async throws -> Termination {
        while true {
            if let ended = try reapIfEnded() { return ended }
            let descriptor = DescriptorWatch.openProcessDescriptor(pid)
            guard descriptor >= 0 else {
                // ESRCH: it ended and was reaped between the two calls; the next reap says so.
                if -descriptor == ESRCH { continue }
                throw SystemError(path: "pid \(pid)", operation: "watch (pidfd_open)", errno: -descriptor)
            }
            defer { close(descriptor) }
            // Another waiter may have reaped the child between the two calls, and the pid gone
            // to another process, whose descriptor this would be: the record says so first.
            if let ended = try reapIfEnded() { return ended }
            let ended: Bool
            do {
                ended = try await DescriptorWatch.readable(descriptor)
            } catch {
                throw SystemError(path: "pid \(pid)", operation: "watch (epoll or poll)", errno: error.errno)
            }
            guard ended else { throw CancellationError() }
        }
    }
}
