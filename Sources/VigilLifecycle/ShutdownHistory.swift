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
    /// None: this listener keeps no shutdown history.
    public var shutdownHistory: (any ShutdownHistory)? { nil }
}

// Chosen when the conformance is checked, so finding the history costs no dynamic cast: a cast
// to a protocol makes the runtime scan every conformance record of the binary the first time it
// sees each listener type (measured: 146 K instructions per listener type, 0.9 M of a 6 M
// instruction start, README "Performance").
extension Listener where Self: ShutdownHistory {
    /// The listener itself.
    public var shutdownHistory: (any ShutdownHistory)? { self }
}
