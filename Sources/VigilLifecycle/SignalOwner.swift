import Synchronization
import VigilEventLoop

/// Owns a set of signals for the process: installs their handlers and calls one function for
/// each delivery.
///
/// There is one owner per signal: creating a second owner for a signal that is already owned
/// is a programming error and stops the process with a message that says so.
///
/// - Important: Signal dispositions are process-wide. While an owner exists, nothing else in
///   the process may trap its signals (do not also give them to a `ServiceGroup`).
final class SignalOwner: Sendable {
    private static let owned = Mutex<Set<Int32>>([])

    private let signals: [ProcessSignal]
    private let watch: SignalWatch

    /// Installs handlers for `signals`; `handler` runs for each delivery (on the loop's thread
    /// under ``EventLoopExecutor``, else on a private queue: see `SignalWatch`). Returns once
    /// every handler is installed, so a signal sent afterwards is never lost. `unowned` hears
    /// each signal the loop took and discarded because nobody owns it.
    ///
    /// - Throws: `SignalWatchError` when the loop's signalfd cannot take one of them; nothing is
    ///   owned then.
    init(
        signals: [ProcessSignal],
        unowned: (@Sendable (ProcessSignal) -> Void)? = nil,
        handler: @escaping @Sendable (ProcessSignal) -> Void
    ) throws(SignalWatchError) {
        Self.owned.withLock { owned in
            for signal in signals {
                precondition(
                    owned.insert(signal.rawValue).inserted,
                    "\(signal) already has an owner in this process. Vigil owns each signal once: "
                        + "do not run two ListenerGroups, and do not give this signal to a ServiceGroup too."
                )
            }
        }
        self.signals = signals
        var unownedNumber: (@Sendable (Int32) -> Void)?
        if let unowned { unownedNumber = { unowned(ProcessSignal(rawValue: $0)) } }
        do throws(SignalWatchError) {
            watch = try SignalWatch(signals: signals.map(\.rawValue), unowned: unownedNumber) {
                handler(ProcessSignal(rawValue: $0))
            }
        } catch {
            Self.owned.withLock { owned in
                for signal in signals { owned.remove(signal.rawValue) }
            }
            throw error
        }
    }

    /// Stops delivering the signals and gives up their ownership.
    func release() {
        watch.cancel()
        Self.owned.withLock { owned in
            for signal in signals { owned.remove(signal.rawValue) }
        }
    }
}
