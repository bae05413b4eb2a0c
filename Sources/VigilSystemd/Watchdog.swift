#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// systemd's watchdog (`WatchdogSec=`): ping at half the interval, but only when healthy.
///
/// A daemon that pings from a timer whether or not it works defeats the watchdog. This one pings
/// only after `probe` made a round trip through the mediator and its listeners; a wedged mediator
/// means no ping, and systemd restarts the daemon. With the watchdog off there is no `Watchdog`
/// and so no timer and no periodic wake-up.
public struct Watchdog: Sendable {
    /// The interval systemd enforces (`WatchdogSec=`).
    public let interval: Duration

    /// Creates a watchdog with an explicit interval (tests, or a daemon's own choice).
    public init(interval: Duration) {
        self.interval = interval
    }

    /// The watchdog systemd asked for, or `nil` when it is off or meant for another process.
    ///
    /// Reads `WATCHDOG_USEC` and honours `WATCHDOG_PID`, as `sd_watchdog_enabled(0, &usec)` does
    /// (see ``init(environment:pid:)``); the variables stay set.
    public static func fromEnvironment() -> Watchdog? {
        Watchdog(environment: { getenv($0).map { String(cString: $0) } }, pid: getpid())
    }

    /// The watchdog that `WATCHDOG_USEC` and `WATCHDOG_PID` ask of process `pid`, following
    /// `sd_watchdog_enabled(3)`: `nil` when `WATCHDOG_USEC` is unset, not a decimal number of
    /// microseconds, beyond 2^64 − 1, 0 or 2^64 − 1 (systemd's "infinity"), or when
    /// `WATCHDOG_PID` is set and is not a valid pid or not `pid`. Only decimal digits are
    /// accepted (what systemd writes); no value traps.
    package init?(environment: (String) -> String?, pid: Int32) {
        guard let text = environment("WATCHDOG_USEC"), let usec = Self.decimal(text), usec != 0, usec != .max
        else { return nil }
        if let owner = environment("WATCHDOG_PID") {
            guard let value = Self.decimal(owner), value > 0, value <= UInt64(Int32.max), Int32(value) == pid
            else { return nil }
        }
        self.init(microseconds: usec)
    }

    /// `text` as an unsigned decimal number: digits only, `nil` when it overflows `UInt64`.
    private static func decimal(_ text: String) -> UInt64? {
        guard !text.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in text.utf8 {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    /// The watchdog for a `WATCHDOG_USEC` value: `nil` for 0 (off); a value beyond `Int64`
    /// microseconds (libsystemd accepts up to 2^64 − 2) saturates instead of trapping.
    package init?(microseconds usec: UInt64) {
        guard usec > 0 else { return nil }
        self.init(interval: .microseconds(Int64(exactly: usec) ?? .max))
    }

    /// How often a healthy daemon pings: half the interval.
    public var pingInterval: Duration { interval / 2 }

    /// How long a probe may take before the daemon counts as wedged: a quarter of the interval,
    /// so a ping that follows still lands well before systemd's deadline.
    public var probeTimeout: Duration { interval / 4 }

    /// Pings until the task is cancelled: every ``pingInterval``, `probe`, and `ping` if healthy.
    ///
    /// - Parameters:
    ///   - probe: the round trip through the mediator; `false` (or no answer in
    ///     ``probeTimeout``) withholds the ping.
    ///   - ping: sends `WATCHDOG=1`.
    ///   - missed: told about each withheld ping.
    ///   - sleep: how to wait (`EventLoopExecutor.sleep(for:)` under Vigil's event loop).
    public func run(
        probe: @Sendable (Duration) async -> Bool,
        ping: @Sendable () -> Void,
        missed: @Sendable () -> Void = {},
        sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) async {
        let clock = ContinuousClock()
        var deadline = clock.now
        while !Task.isCancelled {
            deadline += pingInterval
            do {
                try await sleep(max(deadline - clock.now, .zero))
            } catch {
                return
            }
            if await probe(probeTimeout) {
                ping()
            } else {
                missed()
            }
        }
    }
}
