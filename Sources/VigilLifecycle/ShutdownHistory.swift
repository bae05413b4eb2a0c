/// What knows whether the daemon's previous run stopped cleanly. A listener that conforms
/// reports it in `status.json`'s `previousShutdownClean` (the first such listener; none: the
/// key stays absent, unknown), and so does a ``ServiceListener`` handed one
/// (`ServiceListener(name:shutdownHistory:…)`). `PersistenceListener` and `ShutdownMarker`
/// (VigilPersistence) conform.
public protocol ShutdownHistory: Sendable {
    /// `false` when the previous run did not stop cleanly, `true` when it did, `nil` while
    /// unknown (before the daemon's state was read).
    var previousShutdownClean: Bool? { get }
}

extension Listener {
    /// The shutdown history this listener keeps: itself when it conforms, the one a
    /// ``ServiceListener`` was handed, else `nil`.
    package var shutdownHistory: (any ShutdownHistory)? {
        if let history = self as? any ShutdownHistory { return history }
        return (self as? ServiceListener)?.shutdownHistory
    }
}
