import CVigilEarlySignals

/// vigild's signal policy from the first instruction on.
///
/// systemd may signal the main PID the moment it exists, and before anyone blocks `SIGHUP` its
/// default action kills the process ("Failed with result 'protocol'"). So a C constructor
/// (`CVigilEarlySignals`) runs before the Swift runtime and `main`, and:
/// - blocks `SIGHUP`, `SIGINT`, `SIGTERM`, `SIGUSR1`, `SIGUSR2` and every real-time signal
///   (`--reload-signal` may name any): an early one waits, queued, until the daemon takes it
///   from its signalfd and handles it as usual. A real-time signal the daemon does not own
///   stays pending and does nothing.
/// - ignores `SIGPIPE`: a write to a closed pipe (a vanished stderr reader) fails with `EPIPE`
///   instead of killing the daemon.
/// - ignores `SIGXFSZ`: a write past `RLIMIT_FSIZE` fails with `EFBIG` (a failed checkpoint,
///   reported as such) instead of a core dump.
///
/// `SIGUSR2` is a user signal (``SignalMap/default``): no vigild listener uses it, and the
/// journal notes "Handled SIGUSR2". `SIGQUIT` keeps its default (a core dump on request).
///
/// The client subcommands (`check-config`, `reload`, `status`) are not the daemon: they get the
/// mask and dispositions they were started with back, so Ctrl-C and `systemctl stop` end them.
enum EarlySignals {
    /// `true` when `arguments` (argv) start the daemon: no subcommand, `run`, or options of the
    /// default `run` subcommand.
    static func startDaemon(_ arguments: [String]) -> Bool {
        guard let first = arguments.dropFirst().first else { return true }
        if first == "run" { return true }
        return first.hasPrefix("-") && !["-h", "--help", "--version"].contains(first)
    }

    /// Keeps the early block for the daemon; gives anything else its original signal state.
    static func settle(arguments: [String]) {
        if !startDaemon(arguments) { cvigil_early_signals_restore() }
    }

    /// `CLOCK_MONOTONIC` in ns when the signals were blocked, or `nil` if the constructor did
    /// not run.
    static var blockedAt: UInt64? {
        let time = cvigil_early_signals_blocked_at()
        return time == 0 ? nil : time
    }
}
