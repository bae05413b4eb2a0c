import VigilLifecycle
import VigilSystemd

extension SystemdNotifier: ServiceManagerNotifier {
    /// Sends the messages as one `sd_notify` datagram.
    public func notify(_ messages: [NotifyMessage]) throws {
        try send(NotifyMessage.datagram(messages))
    }
}

extension SystemdError: ErrnoRepresentable {}
