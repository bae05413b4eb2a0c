import VigilPlatform

/// Threads of the system's own, for work that blocks (a semaphore wait, `poll`, a blocking
/// send): never Swift's cooperative pool, which must not block, nor Dispatch's, whose pool on
/// Linux is as wide as the CPU count and grows only when a monitor notices stalled workers,
/// about once a second.
///
/// Every thread is born with the signals blocked (a thread inherits its creator's mask), so
/// that a signal sent to the process (`SIGTERM`, `SIGHUP`, …) is taken by the daemon's own
/// thread, never by a helper, even when the helper is made before the daemon blocked the
/// signals it owns (a daemon without VigilEarlySignals). The faults a crash raises on the thread
/// stay unblocked (a blocked `SIGSEGV` kills the process without Swift's crash report), and so
/// does `SIGPROF`, which that report uses to stop the threads. The creator's own mask is
/// restored before this returns.
package enum SystemThread {
    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Runs `body` on a new thread and returns it: join it, or detach it. Throws
    /// `pthread_create`'s error (`EAGAIN`: `RLIMIT_NPROC` reached, or no memory) when no thread
    /// could be made; `body` does not run then.
    package static func start(_ body: @escaping @Sendable () -> Void) throws(SystemError) -> pthread_t {
        var blocked = sigset_t()
        sigfillset(&blocked)
        for kept in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGPROF] { sigdelset(&blocked, kept) }
        var creator = sigset_t()
        pthread_sigmask(SIG_SETMASK, &blocked, &creator)
        defer { pthread_sigmask(SIG_SETMASK, &creator, nil) }
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            },
            context
        )
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw SystemError(path: "thread", operation: "start a", errno: result)
        }
        return thread
    }

    /// ``start(_:)``, the thread detached: it ends by itself when `body` returns.
    package static func startDetached(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        pthread_detach(try start(body))
    }
}
