/// Why the daemon is stopping: a signal, or a request from code.
public struct TerminationReason: Hashable, Sendable, CustomStringConvertible {
    private enum Wrapped: Hashable, Sendable {
        case signal(ProcessSignal)
        case requested(String)
    }

    private let wrapped: Wrapped

    private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    /// A stop signal arrived (`SIGTERM` from `systemctl stop`, `SIGINT` from Ctrl-C).
    package static func signal(_ signal: ProcessSignal) -> Self { Self(.signal(signal)) }

    /// Code asked the daemon to stop, for the reason given.
    package static func requested(_ reason: String) -> Self { Self(.requested(reason)) }

    /// The signal that asked the daemon to stop, if a signal did.
    public var signal: ProcessSignal? {
        if case .signal(let signal) = wrapped { return signal }
        return nil
    }

    /// `SIGTERM`, or the reason given by code.
    public var description: String {
        switch wrapped {
        case .signal(let signal): signal.description
        case .requested(let reason): reason
        }
    }
}
