/// One thing the mediator reports to its service manager, through ``ServiceManagerNotifier``.
///
/// The lifecycle names what happened; the notifier spells it. VigilSystemd, which imports this
/// seam, spells it as sd_notify(3) does (`READY=1`, `RELOADING=1`) and keeps each datagram under
/// systemd's limit.
package struct NotifyMessage: Hashable, Sendable, CustomStringConvertible {
    package enum Kind: Hashable, Sendable {
        case ready
        case reloading(UInt64)
        case stopping
        case status(String)
        case errno(Int32)
        case extendTimeout(UInt64)
        case watchdog
        case watchdogTrigger
    }

    package let kind: Kind

    private init(_ kind: Kind) { self.kind = kind }

    /// `READY=1`: start-up finished, or a reload finished (applied or rejected).
    package static let ready = Self(.ready)
    /// `RELOADING=1` and `MONOTONIC_USEC=` together, as `Type=notify-reload` requires.
    ///
    /// - Parameter monotonicMicroseconds: `CLOCK_MONOTONIC` when the reload began, in µs.
    package static func reloading(monotonicMicroseconds: UInt64) -> Self { Self(.reloading(monotonicMicroseconds)) }
    /// `STOPPING=1`: the daemon began to shut down.
    package static let stopping = Self(.stopping)
    /// `STATUS=`: one human line, shown by `systemctl status`.
    ///
    /// The text as given: the notifier makes it safe for its wire (VigilSystemd escapes it and
    /// bounds it to systemd's limit).
    package static func status(_ text: String) -> Self { Self(.status(text)) }
    /// The most bytes of `STATUS=` text on the wire, after escaping, ellipsis included: the
    /// notifier cuts there, and `ListenerContext.reportStatus(_:)` keeps no more than it shows.
    package static let maximumStatusBytes = 1024
    /// `ERRNO=`: the errno-style code of a failure.
    package static func errno(_ code: Int32) -> Self { Self(.errno(code)) }
    /// `EXTEND_TIMEOUT_USEC=`: a slow but healthy step needs this much more time.
    package static func extendTimeout(microseconds: UInt64) -> Self { Self(.extendTimeout(microseconds)) }
    /// `WATCHDOG=1`: the daemon is healthy.
    package static let watchdog = Self(.watchdog)
    /// `WATCHDOG=trigger`: the daemon declares itself failed; systemd acts as on a watchdog timeout.
    package static let watchdogTrigger = Self(.watchdogTrigger)

    /// `true` for `READY=1`.
    package var isReady: Bool { kind == .ready }

    /// What the message says, for a log line: `ready`, `status: …` (the notifier's wire
    /// spelling is its own).
    package var description: String {
        switch kind {
        case .ready: "ready"
        case .reloading(let usec): "reloading (monotonic \(usec) µs)"
        case .stopping: "stopping"
        case .status(let text): "status: " + text
        case .errno(let code): "errno \(code)"
        case .extendTimeout(let usec): "extend timeout by \(usec) µs"
        case .watchdog: "watchdog"
        case .watchdogTrigger: "watchdog trigger"
        }
    }
}
