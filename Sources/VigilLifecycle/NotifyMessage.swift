/// One assignment the daemon reports to its service manager, as sd_notify(3) spells it.
///
/// An open set, like `UnixSignal`. `description` is the exact text that goes on the wire; a
/// message may span several lines when systemd needs them in the same datagram
/// (``reloading(monotonicMicroseconds:)``).
public struct NotifyMessage: Hashable, Sendable, CustomStringConvertible {
    private enum Wrapped: Hashable, Sendable {
        case ready
        case reloading(UInt64)
        case stopping
        case status(String)
        case errno(Int32)
        case extendTimeout(UInt64)
        case watchdog
        case watchdogTrigger
    }

    private let wrapped: Wrapped

    private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    /// `READY=1`: start-up finished, or a reload finished (applied or rejected).
    public static let ready = Self(.ready)
    /// `RELOADING=1` and `MONOTONIC_USEC=` together, as `Type=notify-reload` requires.
    ///
    /// - Parameter monotonicMicroseconds: `CLOCK_MONOTONIC` when the reload began, in µs.
    public static func reloading(monotonicMicroseconds: UInt64) -> Self { Self(.reloading(monotonicMicroseconds)) }
    /// `STOPPING=1`: the daemon began to shut down.
    public static let stopping = Self(.stopping)
    /// `STATUS=`: one human line, shown by `systemctl status`. Line breaks become spaces.
    public static func status(_ text: String) -> Self { Self(.status(text)) }
    /// `ERRNO=`: the errno-style code of a failure.
    public static func errno(_ code: Int32) -> Self { Self(.errno(code)) }
    /// `EXTEND_TIMEOUT_USEC=`: a slow but healthy step needs this much more time.
    public static func extendTimeout(microseconds: UInt64) -> Self { Self(.extendTimeout(microseconds)) }
    /// `WATCHDOG=1`: the daemon is healthy.
    public static let watchdog = Self(.watchdog)
    /// `WATCHDOG=trigger`: the daemon declares itself failed; systemd acts as on a watchdog timeout.
    public static let watchdogTrigger = Self(.watchdogTrigger)

    /// `true` for `READY=1`.
    public var isReady: Bool { wrapped == .ready }

    /// The wire text, e.g. `READY=1` or `RELOADING=1\nMONOTONIC_USEC=123`.
    public var description: String {
        switch wrapped {
        case .ready: "READY=1"
        case .reloading(let usec): "RELOADING=1\nMONOTONIC_USEC=\(usec)"
        case .stopping: "STOPPING=1"
        case .status(let text):
            "STATUS=" + String(text.map { $0.isNewline ? " " : $0 })
        case .errno(let code): "ERRNO=\(code)"
        case .extendTimeout(let usec): "EXTEND_TIMEOUT_USEC=\(usec)"
        case .watchdog: "WATCHDOG=1"
        case .watchdogTrigger: "WATCHDOG=trigger"
        }
    }

    /// The datagram for several messages: their texts joined by newlines.
    public static func datagram(_ messages: [NotifyMessage]) -> String {
        messages.map(\.description).joined(separator: "\n")
    }
}
