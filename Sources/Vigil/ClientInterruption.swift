import Synchronization
import VigilPlatform

/// SIGTERM and SIGINT while `reload` waits: recorded by a handler instead of killing the
/// client, so it can tell a stop (the daemon is stopping too) from an admin giving up.
///
/// - Important: installs process-wide handlers for SIGTERM and SIGINT.
final class ClientInterruption: Sendable {
    private static let count = Atomic<Int>(0)
    private static let last = Atomic<Int32>(0)
    private let seen = Atomic<Int>(0)

    init() {
        for signal in [SIGTERM, SIGINT] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                ClientInterruption.last.store(signal, ordering: .relaxed)
                ClientInterruption.count.add(1, ordering: .relaxed)
            }
            sigemptyset(&action.sa_mask)
            sigaction(signal, &action, nil)
            // main may have blocked the handled signals for the daemon; the client takes them.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, signal)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
        }
    }

    /// The signal that arrived since the last call, if any; when a second one has arrived since
    /// the first (the admin insists), the process dies of it.
    var received: Int32? {
        let count = Self.count.load(ordering: .relaxed)
        let seen = self.seen.exchange(count, ordering: .relaxed)
        guard count > seen else { return nil }
        let signal = Self.last.load(ordering: .relaxed)
        if count >= 2 { dieOf(signal) }
        return signal
    }

    /// Ends the process as the signal would have without the handler.
    func dieOf(_ signal: Int32) -> Never {
        Glibc.signal(signal, SIG_DFL)
        raise(signal)
        exit(128 + signal)
    }
}
