import VigilPlatform

/// Runs blocking work (`recvmsg`, `waitpid`) on a thread of its own.
///
/// Not on Dispatch's global queues: on Linux their pool is as wide as the CPU count and grows
/// only when a monitor notices stalled workers, about once a second, so a few blocking loops
/// delay every other Dispatch user (signal sources among them) by seconds. Not on Swift's
/// cooperative pool either, which must never block.
package enum DetachedThread {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    package static func run(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            },
            box
        )
        precondition(result == 0, "pthread_create failed: \(result)")
        pthread_detach(thread)
    }
}
