/// The seam through which the mediator reports to the service manager.
///
/// One requirement: send these messages in one datagram. `VigilSystemd` implements it with
/// `sd_notify(3)`; `VigilTesting` ships a recording one. The lifecycle core knows nothing else
/// about systemd.
package protocol ServiceManagerNotifier: Sendable {
    /// Sends `messages` together, in one notification.
    ///
    /// Not being under a service manager is not an error (send nothing); a failed send is.
    func notify(_ messages: [NotifyMessage]) throws

    /// Waits, at most `timeout`, until the service manager has processed every notification sent
    /// before (systemd: `BARRIER=1`), so that none is lost when the process exits; waits for
    /// nothing when none can be (systemd: everything is in its queue, and it reads that queue
    /// before it handles the exit of the process it started).
    ///
    /// - Returns: `true` when the service manager confirmed or there is nothing to wait for;
    ///   `false` when `timeout` passed first.
    func synchronize(timeout: Duration) throws -> Bool

    /// Starts what ``synchronize(timeout:)`` will wait for, without waiting: called right after
    /// `STOPPING=1`, so the service manager's answer overlaps the listeners' stop.
    func prepareToSynchronize()
}

extension ServiceManagerNotifier {
    /// Prepares nothing.
    package func prepareToSynchronize() {}

    /// Waits for nothing: a notifier whose sends arrive when they return needs no barrier.
    package func synchronize(timeout: Duration) throws -> Bool { true }
}

/// A notifier for daemons that run without a service manager: it sends nothing.
package struct NoServiceManager: ServiceManagerNotifier {
    /// Creates the notifier.
    package init() {}

    package func notify(_ messages: [NotifyMessage]) throws {}
}
