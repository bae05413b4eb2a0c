import VigilPlatform

/// Starts detached threads for blocking work (the notifier's sender, the accept poller): never
/// Swift's cooperative pool, which must not block, nor Dispatch's, which grows slowly.
enum PosixThread {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Runs `body` on a new detached thread; false (and `body` not run) when none could be
    /// created (out of memory, `RLIMIT_NPROC`).
    static func start(_ body: @escaping @Sendable () -> Void) -> Bool { start(reporting: body) == 0 }

    /// ``start(_:)``, returning `pthread_create`'s error (`EAGAIN`: `RLIMIT_NPROC`), 0 when the
    /// thread runs.
    static func start(reporting body: @escaping @Sendable () -> Void) -> Int32 {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { context in
                Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
                return nil
            },
            box
        )
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            return result
        }
        pthread_detach(thread)
        return 0
    }
}
