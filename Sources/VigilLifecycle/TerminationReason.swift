/// Why the daemon is stopping: a signal, or a request from code.
public struct TerminationReason: Hashable, Sendable, CustomStringConvertible {
    private enum Wrapped: Hashable, Sendable {
        case signal(ProcessSignal)
        case requested(String)
        case cancelled
    }

    private let wrapped: Wrapped

    private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    /// A stop signal arrived (`SIGTERM` from `systemctl stop`, `SIGINT` from Ctrl-C).
    package static func signal(_ signal: ProcessSignal) -> Self { Self(.signal(signal)) }

    /// Code asked the daemon to stop, for the reason given.
    package static func requested(_ reason: String) -> Self { Self(.requested(reason)) }

    /// The task that runs the daemon was cancelled (by its embedder, or a `ServiceGroup`
    /// escalating its shutdown).
    package static let cancelled = Self(.cancelled)

    /// Whether the request came from outside the daemon's own code (a signal, a cancelled
    /// task): only such a request, made again during a stop, hurries it.
    package var isFromOutside: Bool {
        switch wrapped {
        case .signal, .cancelled: true
        case .requested: false
        }
    }

    /// The signal that asked the daemon to stop, if a signal did.
    package var signal: ProcessSignal? {
        if case .signal(let signal) = wrapped { return signal }
        return nil
    }

    /// `SIGTERM`, or the reason given by code.
    public var description: String {
        switch wrapped {
        case .signal(let signal): signal.description
        case .requested(let reason): reason
        case .cancelled: "task cancelled"
        }
    }
}
