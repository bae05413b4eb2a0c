/// Which lifecycle event each owned signal stands for.
///
/// The defaults follow systemd's conventions: `SIGHUP` reloads, `SIGTERM` and `SIGINT`
/// terminate, `SIGUSR1` and `SIGUSR2` are user signals (a listener that has no use for one
/// ignores it; the lifecycle logger notes it, so a stray `SIGUSR2` neither kills the daemon nor
/// goes unseen). Change a mapping when the unit says otherwise, e.g.
/// `ReloadSignal=SIGRTMIN+3`:
///
/// ```swift
/// var signals = SignalMap.default
/// signals.reloadSignal = .realTime(3)
/// ```
package struct SignalMap: Sendable, Hashable {
    /// What a signal asks for.
    package enum Action: Sendable, Hashable {
        /// Reload the configuration.
        case reload
        /// Deliver a user-signal event carrying the signal.
        case userSignal
        /// Stop the daemon.
        case terminate
        /// Nothing: the signal is owned (taken, so it does not stay pending) and the discard
        /// logged. What a signal the reload moved away from becomes: after
        /// `--reload-signal SIGRTMIN+3`, a `SIGHUP` (a closed terminal's, a habit's) is blocked
        /// from the process's first instruction, so unowned it would stay pending unseen.
        case ignore
    }

    /// The mapping, one entry per owned signal.
    package private(set) var actions: [ProcessSignal: Action]

    /// An empty map: the daemon owns no signals.
    package init() { self.actions = [:] }

    /// `SIGHUP` → reload, `SIGTERM`/`SIGINT` → terminate, `SIGUSR1`/`SIGUSR2` → user signal.
    package static var `default`: SignalMap {
        var map = SignalMap()
        map[.sighup] = .reload
        map[.sigterm] = .terminate
        map[.sigint] = .terminate
        map[.sigusr1] = .userSignal
        map[.sigusr2] = .userSignal
        return map
    }

    /// The action for a signal, or `nil` when the daemon does not own it. Setting `nil`
    /// releases the signal.
    package subscript(signal: ProcessSignal) -> Action? {
        get { actions[signal] }
        set { actions[signal] = newValue }
    }

    /// The one signal that reloads. Setting it moves the reload mapping to the new signal
    /// (systemd's `ReloadSignal=`).
    package var reloadSignal: ProcessSignal? {
        get { actions.first(where: { $0.value == .reload })?.key }
        set {
            for (signal, action) in actions where action == .reload { actions[signal] = .ignore }
            if let newValue { actions[newValue] = .reload }
        }
    }

    /// The event a delivery of `signal` stands for, or `nil` when the daemon does not own it.
    package func event(for signal: ProcessSignal) -> LifecycleEvent? {
        switch actions[signal] {
        case .reload: .reload
        case .terminate: .terminate(.signal(signal))
        case .userSignal: .userSignal(signal)
        case .ignore, nil: nil
        }
    }

    /// The signals the daemon owns, in number order.
    package var signals: [ProcessSignal] { actions.keys.sorted { $0.rawValue < $1.rawValue } }
}
