import VigilEventLoop
import VigilPOSIX
import VigilPlatform

/// systemd's watchdog (`WatchdogSec=`): ping at half the interval, but only when healthy.
///
/// A daemon that pings from a timer whether or not it works defeats the watchdog. This one pings
/// only after `probe` made a round trip through the mediator and its listeners; a wedged mediator
/// means no ping, and systemd restarts the daemon. With the watchdog off there is no `Watchdog`
/// and so no timer and no periodic wake-up.
package struct Watchdog: Sendable {
    /// The interval systemd enforces (`WatchdogSec=`).
    package let interval: Duration

    /// Creates a watchdog with an explicit interval (tests, or a daemon's own choice).
    package init(interval: Duration) {
        self.interval = interval
    }

    /// The watchdog systemd asked for, or `nil` when it is off or meant for another process.
    ///
    /// Reads `WATCHDOG_USEC` and honours `WATCHDOG_PID`, as `sd_watchdog_enabled(0, &usec)` does
    /// (see `init(environment:pid:)`); the variables stay set.
    package static func fromEnvironment() -> Watchdog? {
        Watchdog(environment: processEnvironment, pid: getpid())
    }

    /// This process's environment, as the watchdog reads it.
    package static let processEnvironment: @Sendable (String) -> String? = { getenv($0).map { String(cString: $0) } }

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

    /// Why `WATCHDOG_USEC` or `WATCHDOG_PID` turned the watchdog off although set, or `nil`: a
    /// value that is not what systemd writes (decimal digits) says nothing, and the daemon would
    /// run without the watchdog the unit asked for, without a word. A `WATCHDOG_PID` naming
    /// another process is no problem: the watchdog is that one's.
    package static func environmentProblem(environment: (String) -> String?) -> String? {
        func problem(_ variable: String, _ text: String) -> String {
            "\(variable)=\(DisplayText.quoted(text)) is not a decimal number (systemd writes digits only): "
                + "the watchdog is off. Fix or unset \(variable) in the environment that started the daemon"
        }
        guard let usecText = environment("WATCHDOG_USEC") else { return nil }
        guard let usec = decimal(usecText) else { return problem("WATCHDOG_USEC", usecText) }
        // Off on purpose (0, infinity): WATCHDOG_PID is not read, as sd_watchdog_enabled does not.
        guard usec != 0, usec != .max, let pidText = environment("WATCHDOG_PID"), decimal(pidText) == nil else {
            return nil
        }
        return problem("WATCHDOG_PID", pidText)
    }

    /// `text` as an unsigned decimal number: digits only, `nil` when it overflows `UInt64` (also
    /// how the notifier reads `SYSTEMD_EXEC_PID`).
    package static func decimal(_ text: String) -> UInt64? {
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

    /// The shortest interval a daemon can keep: a ping every half of it, each after a health
    /// probe through every listener in a quarter of it. `Daemon` refuses to start under a
    /// shorter `WatchdogSec=` (systemd would kill the daemon anyway, and pinging every few
    /// microseconds would take a CPU).
    package static let minimumInterval: Duration = .milliseconds(10)

    /// Why ``interval`` is too short to keep (below ``minimumInterval``), or `nil`.
    package var tooShort: String? {
        guard interval < Self.minimumInterval else { return nil }
        let micros = interval.components.seconds * 1_000_000 + interval.components.attoseconds / 1_000_000_000_000
        return "WatchdogSec= is \(micros) µs (WATCHDOG_USEC=\(micros)), shorter than the 10 ms a daemon can keep "
            + "(a ping every half of it, each after a health probe through every listener); "
            + "raise WatchdogSec= in the unit, or set it to 0 to turn the watchdog off"
    }

    /// How often a healthy daemon pings: half the interval.
    package var pingInterval: Duration { interval / 2 }

    /// How long a probe may take before the daemon counts as wedged: a quarter of the interval,
    /// so a ping that follows still lands well before systemd's deadline.
    package var probeTimeout: Duration { interval / 4 }

    /// What a health probe found.
    package enum Health: Sendable, Hashable {
        /// The mediator answered in time and every listener is healthy: ping.
        case healthy
        /// The mediator is wedged or a listener is unhealthy: withhold the ping (and say so).
        case unhealthy
        /// The daemon is stopping (a stop was requested, or `STOPPING=1` went out): stop pinging,
        /// quietly.
        ///
        /// systemd stops the watchdog when the unit leaves the running state — on `STOPPING=1`,
        /// or on `systemctl stop` — and the stop is bounded by `TimeoutStopSec=` instead. A
        /// ping sent after that would arm the watchdog again (systemd 252 does, measured in
        /// Tests/EndToEnd/ready.sh), so that a long graceful drain would be killed with the
        /// watchdog signal; and an error entry for every withheld ping would be a false alarm.
        case stopping
        /// The daemon has not reported ready yet: no ping and no word this round. systemd arms
        /// the watchdog once the unit runs (after `READY=1`); before, `TimeoutStartSec=` and the
        /// start budgets bound the start, and the mediator, busy starting, answers no probe: a
        /// "health probe failed" entry for each round of a slow start would be a false alarm.
        case starting
    }

    /// Pings until the daemon stops or the task is cancelled: every ``pingInterval``, `probe`,
    /// and `ping` if healthy. Waits with `EventLoopExecutor.sleep(for:)`: on Vigil's event loop
    /// one timer entry, otherwise `Task.sleep`.
    ///
    /// - Parameters:
    ///   - probe: the round trip through the mediator; ``Health/unhealthy`` (or no answer in
    ///     ``probeTimeout``) withholds the ping; ``Health/stopping`` ends the loop without a word.
    ///   - ping: sends `WATCHDOG=1`.
    ///   - missed: told about each withheld ping.
    package func run(
        probe: @Sendable (Duration) async -> Health,
        ping: @Sendable () -> Void,
        missed: @Sendable () -> Void = {}
    ) async {
        await run(probe: probe, ping: ping, missed: missed, clock: .monotonic)
    }

    /// ``run(probe:ping:missed:)`` on `clock` (a test's, advanced by hand or by each wait).
    package func run(
        probe: @Sendable (Duration) async -> Health,
        ping: @Sendable () -> Void,
        missed: @Sendable () -> Void,
        clock: LoopClock
    ) async {
        var deadline = clock.now
        while !Task.isCancelled {
            // After a late round (a slow probe, a busy loop) the next ping goes out at once and
            // the schedule starts again from now: no burst of pings to catch up.
            deadline = max(deadline + pingInterval, clock.now)
            do {
                try await clock.sleep(for: max(deadline - clock.now, .zero))
            } catch {
                return
            }
            switch await probe(probeTimeout) {
            case .healthy: ping()
            case .unhealthy: missed()
            case .stopping: return
            case .starting: continue
            }
        }
    }
}
