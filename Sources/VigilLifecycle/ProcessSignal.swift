import VigilPlatform

/// A POSIX signal the daemon owns: what a user-signal event carries (``sigusr1``, ``sigusr2``).
///
/// Like `UnixSignal` from swift-service-lifecycle, but open (inside the package) to real-time
/// signals, which the mediator's signal map can own. Its `description` is the C spelling, as
/// systemd and `kill -l` print it.
public struct ProcessSignal: Hashable, Sendable, CustomStringConvertible {
    /// The signal number, as `kill(2)` takes it.
    package let rawValue: Int32

    /// Wraps a signal number.
    ///
    /// - Parameter rawValue: a signal number between 1 and `SIGRTMAX`.
    package init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// Hangup: `systemctl reload` under `Type=notify-reload`, and `kill -HUP`.
    package static let sighup = Self(rawValue: SIGHUP)
    /// Termination: what `systemctl stop` sends.
    package static let sigterm = Self(rawValue: SIGTERM)
    /// Interrupt: Ctrl-C on a terminal.
    package static let sigint = Self(rawValue: SIGINT)
    /// User-defined signal 1.
    public static let sigusr1 = Self(rawValue: SIGUSR1)
    /// User-defined signal 2.
    public static let sigusr2 = Self(rawValue: SIGUSR2)
    /// Quit: Ctrl-\ on a terminal.
    package static let sigquit = Self(rawValue: SIGQUIT)
    /// Alarm clock; handy for in-process tests.
    package static let sigalrm = Self(rawValue: SIGALRM)

    /// The real-time signal `SIGRTMIN+offset`.
    ///
    /// - Parameter offset: 0 or more; `SIGRTMIN+offset` must not pass `SIGRTMAX`.
    package static func realTime(_ offset: Int32) -> Self {
        let signal = Self.realTimeMinimum + offset
        precondition(
            offset >= 0 && signal <= Self.realTimeMaximum,
            "SIGRTMIN+\(offset) is not a real-time signal on this system (SIGRTMAX is \(Self.realTimeMaximum))"
        )
        return Self(rawValue: signal)
    }

    static var realTimeMinimum: Int32 {
        #if canImport(Glibc)
            // SIGRTMIN is a function call in glibc, not a constant, so Swift does not import it.
            __libc_current_sigrtmin()
        #else
            SIGRTMIN
        #endif
    }

    static var realTimeMaximum: Int32 {
        #if canImport(Glibc)
            __libc_current_sigrtmax()
        #else
            SIGRTMAX
        #endif
    }

    private static let names: [(String, Int32)] = [
        ("SIGHUP", SIGHUP), ("SIGINT", SIGINT), ("SIGQUIT", SIGQUIT), ("SIGTERM", SIGTERM),
        ("SIGUSR1", SIGUSR1), ("SIGUSR2", SIGUSR2), ("SIGALRM", SIGALRM), ("SIGWINCH", SIGWINCH),
        ("SIGCONT", SIGCONT), ("SIGPIPE", SIGPIPE), ("SIGCHLD", SIGCHLD), ("SIGTSTP", SIGTSTP),
    ]

    /// Parses a signal name as systemd's `ReloadSignal=` or `kill -s` take it.
    ///
    /// Accepts `SIGHUP`, `HUP`, `SIGRTMIN+3`, `RTMIN+3`, `SIGRTMAX-1`, and the numbers of those
    /// signals. Returns `nil` for anything else: `SIGKILL` and `SIGSTOP` (which no daemon can
    /// handle) by name or number (`9`, `19`), and the numbers between the standard and the
    /// real-time signals that the C library keeps for itself (`32`, `33`).
    package init?(name: String) {
        var text = name.uppercased()
        if let number = Int32(text) {
            let named = Self.names.contains { $0.1 == number }
            guard named || (Self.realTimeMinimum...Self.realTimeMaximum).contains(number) else { return nil }
            self.init(rawValue: number)
            return
        }
        if !text.hasPrefix("SIG") { text = "SIG" + text }
        if let match = Self.names.first(where: { $0.0 == text }) {
            self.init(rawValue: match.1)
            return
        }
        for (prefix, base, sign) in [
            ("SIGRTMIN", Self.realTimeMinimum, Int32(1)), ("SIGRTMAX", Self.realTimeMaximum, Int32(-1)),
        ] where text.hasPrefix(prefix) {
            let rest = text.dropFirst(prefix.count)
            var offset: Int32 = 0
            if !rest.isEmpty {
                // The offset comes from the command line: bounded before any arithmetic.
                guard rest.first == (sign > 0 ? "+" : "-"), let value = Int32(rest.dropFirst()),
                    (0...(Self.realTimeMaximum - Self.realTimeMinimum)).contains(value)
                else { return nil }
                offset = value
            }
            let number = base + sign * offset
            guard number >= Self.realTimeMinimum, number <= Self.realTimeMaximum else { return nil }
            self.init(rawValue: number)
            return
        }
        return nil
    }

    /// The C spelling: `SIGHUP`, `SIGRTMIN+3`, or `signal 40` for a number with no name.
    public var description: String {
        if let match = Self.names.first(where: { $0.1 == rawValue }) { return match.0 }
        if rawValue >= Self.realTimeMinimum, rawValue <= Self.realTimeMaximum {
            let offset = rawValue - Self.realTimeMinimum
            return offset == 0 ? "SIGRTMIN" : "SIGRTMIN+\(offset)"
        }
        return "signal \(rawValue)"
    }
}
