import VigilLifecycle
import VigilSystemd

extension SystemdNotifier: ServiceManagerNotifier {
    /// Sends the messages in one datagram, or in several in order should they not fit in
    /// one (``NotifyMessage/datagrams(_:)``): systemd drops a datagram over its limit whole.
    public func notify(_ messages: [NotifyMessage]) throws {
        for datagram in NotifyMessage.datagrams(messages) { try send(datagram) }
    }

    /// `SystemdNotifier.barrier(timeout:)`: `BARRIER=1`, then a bounded wait for systemd.
    public func synchronize(timeout: Duration) throws -> Bool { try barrier(timeout: timeout) }
}

/// A failed system call, a notification that could not be sent among them, gives systemd its
/// `ERRNO=`.
extension SystemError: ErrnoRepresentable {}
