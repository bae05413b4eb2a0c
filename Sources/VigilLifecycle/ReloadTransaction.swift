import Synchronization

/// One reload, as the listeners see it across its two phases.
///
/// Listeners that produce new values (the configuration listener decoding the new file, say)
/// put them in ``proposed`` during prepare; listeners that depend on them read them there.
/// Nothing in ``ListenerContext/values`` changes until commit.
public final class ReloadTransaction: Sendable {
    /// The configuration generation this reload would make current (the running one + 1).
    package let generation: Int

    /// Values proposed for this reload, visible to the listeners prepared after the proposer.
    public let proposed = ValueStore()

    private let rejectionStorage = Mutex<Rejection?>(nil)

    /// Why a reload was rejected: which listener, and its reason.
    package struct Rejection: Sendable, Hashable, CustomStringConvertible {
        /// The rejecting listener's name.
        package var listener: String
        /// The reason, in words an admin can act on.
        package var reason: String

        package init(listener: String, reason: String) {
            self.listener = listener
            self.reason = reason
        }

        package var description: String { "\(listener): \(reason)" }
    }

    /// Creates a transaction for the given generation (the mediator makes these).
    package init(generation: Int) {
        self.generation = generation
    }

    /// The first rejection, once a listener has rejected; `nil` while the reload can still apply.
    package internal(set) var rejection: Rejection? {
        get { rejectionStorage.withLock { $0 } }
        set { rejectionStorage.withLock { $0 = newValue } }
    }
}
