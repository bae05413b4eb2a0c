import Synchronization
import VigilPOSIX
import VigilPlatform

/// SIGTERM and SIGINT while `reload` waits: recorded by a handler instead of killing the
/// client, so it can tell a stop (the daemon is stopping too) from an admin giving up.
///
/// - Important: installs process-wide handlers for SIGTERM and SIGINT.
final class ClientInterruption: Sendable {
    private static let count = Atomic<Int>(0)
    private static let last = Atomic<Int32>(0)
    private let seen = Atomic<Int>(0)
    private let name: String

    /// - Parameter name: the daemon's name, for the line a SIGTERM that ends the client writes.
    init(name: String) {
        self.name = name
        for signal in [SIGTERM, SIGINT] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                ClientInterruption.last.store(signal, ordering: .relaxed)
                ClientInterruption.count.add(1, ordering: .relaxed)
            }
            // Each handler runs with both signals blocked, so one never runs inside the other:
            // the last signal recorded is the last one delivered.
            sigemptyset(&action.sa_mask)
            sigaddset(&action.sa_mask, SIGTERM)
            sigaddset(&action.sa_mask, SIGINT)
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

    /// Ends the process as the signal would have without the handler; SIGTERM ends it with
    /// exit 2 (no answer) instead, because the shipped unit's `SuccessExitStatus=SIGTERM`
    /// (which keeps a stop right behind a reload clean) would make systemd count a reload
    /// client killed by SIGTERM as a reload that succeeded.
    func dieOf(_ signal: Int32) -> Never {
        if signal == SIGTERM {
            let line = "\(name) reload: SIGTERM before the daemon answered; the outcome is unknown\n"
            _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
            exit(2)
        }
        SystemCall.restoreDefaultAction(signal)
        raise(signal)
        exit(128 + signal)
    }
}
