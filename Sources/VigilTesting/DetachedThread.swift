import VigilPOSIX
import VigilPlatform

/// Runs blocking work (`recvmsg`, `waitpid`) on a thread of its own (`SystemThread`: not
/// Dispatch's pool, not Swift's cooperative one); traps when no thread can be made, which in a
/// test is a failure of the machine, not of the code under test.
package enum DetachedThread {
    package static func run(_ body: @escaping @Sendable () -> Void) {
        do {
            try SystemThread.startDetached(body)
        } catch {
            preconditionFailure("\(error)")
        }
    }
}
