import CVigilSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Sends notifications to the service manager through `sd_notify(3)`.
///
/// `sd_notify` reads `NOTIFY_SOCKET` on every call, and this type never unsets it: a
/// notification sent later (a reload, the stop) must still reach systemd.
public struct SystemdNotifier: Sendable {
    /// Creates a notifier for the socket named by `NOTIFY_SOCKET`.
    public init() {}

    /// `true` when `NOTIFY_SOCKET` is set, i.e. a service manager listens.
    public var isEnabled: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// Sends `text` (newline-separated assignments such as `READY=1\nSTATUS=Running`) as one
    /// datagram.
    ///
    /// Without `NOTIFY_SOCKET` this does nothing: running outside systemd is not an error.
    /// The corresponding C function is `sd_notify(0, text)`.
    ///
    /// - Throws: ``SystemdError`` when the socket is set but the send fails.
    public func send(_ text: String) throws {
        let result = sd_notify(0, text)
        if result < 0 {
            throw SystemdError(
                errno: -result,
                "Could not send '\(text.prefix(40))' to the service manager's NOTIFY_SOCKET"
            )
        }
    }
}
