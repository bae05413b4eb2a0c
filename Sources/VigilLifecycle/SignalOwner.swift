import Synchronization
import VigilEventLoop

/// A signal already has an owner in this process: a second daemon runs in it.
struct SignalAlreadyOwned: Error, CustomStringConvertible {
    let signal: ProcessSignal

    var description: String {
        "\(signal) already has an owner in this process: a Daemon runs in it already; run one Daemon per "
            + "process (and do not give its signals to a ServiceGroup too)"
    }
}

/// Owns a set of signals for the process: installs their handlers and calls one function for
/// each delivery.
///
/// There is one owner per signal: creating a second owner for a signal that is already owned
/// fails with ``SignalAlreadyOwned`` and owns nothing (it stopped the process before, the first
/// daemon with it).
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
    /// - Throws: ``SignalAlreadyOwned`` when one of them has an owner already, or
    ///   `SignalWatchError` when the loop's signalfd cannot take one of them; nothing is owned
    ///   then.
    init(
        signals: [ProcessSignal],
        unowned: (@Sendable (ProcessSignal) -> Void)? = nil,
        handler: @escaping @Sendable (ProcessSignal) -> Void
    ) throws {
        let taken = Self.owned.withLock { owned -> ProcessSignal? in
            if let taken = signals.first(where: { owned.contains($0.rawValue) }) { return taken }
            for signal in signals { owned.insert(signal.rawValue) }
            return nil
        }
        if let taken { throw SignalAlreadyOwned(signal: taken) }
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
