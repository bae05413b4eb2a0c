/// The seam through which the mediator reports to the service manager.
///
/// One requirement: send these messages in one datagram. `VigilSystemd` implements it with
/// `sd_notify(3)`; `VigilTesting` ships a recording one. The lifecycle core knows nothing else
/// about systemd.
public protocol ServiceManagerNotifier: Sendable {
    /// Sends `messages` together, in one notification.
    ///
    /// Not being under a service manager is not an error (send nothing); a failed send is.
    func notify(_ messages: [NotifyMessage]) throws
}

/// A notifier for daemons that run without a service manager: it sends nothing.
public struct NoServiceManager: ServiceManagerNotifier {
    /// Creates the notifier.
    public init() {}

    public func notify(_ messages: [NotifyMessage]) throws {}
}
