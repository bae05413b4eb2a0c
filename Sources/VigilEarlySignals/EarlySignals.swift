import CVigilEarlySignals

/// A daemon's signal policy from the first instruction on: opt in by linking this product into
/// the daemon's executable (and calling ``settle(arguments:)`` first thing in `main`).
///
/// systemd may signal the main PID the moment it exists, and before anyone blocks `SIGHUP` its
/// default action kills the process ("Failed with result 'protocol'"). So a C function in the
/// executable's preinit array (`CVigilEarlySignals`) runs before the Swift runtime and `main`,
/// and:
/// - opens `/dev/null` on each of stdin, stdout and stderr that is closed, so that no descriptor
///   the daemon opens later (the event loop's epoll, say) becomes one of them and takes its log
///   lines. (`EventLoopExecutor` does the same at its start, for a daemon without this product.)
/// - blocks `SIGHUP`, `SIGINT`, `SIGTERM`, `SIGUSR1`, `SIGUSR2` and every real-time signal
///   (`--reload-signal` may name any): an early one waits, queued, until the daemon's
///   `ListenerGroup` takes it over and handles it as usual. Each real-time signal queued counts
///   against `RLIMIT_SIGPENDING`, so one the daemon does not own must not stay pending: a flood
///   of them would use the limit up for the user's other processes (`timer_create` fails).
///   `EventLoopExecutor` takes every blocked real-time signal through its signalfd from its
///   start and discards (and counts: `EventLoopExecutor.discardedSignals`) the unowned ones.
///   Without the event loop nothing takes them: a daemon on the default executor that links
///   this product keeps them queued until it exits.
/// - ignores `SIGPIPE`: a write to a closed pipe (a vanished stderr reader) fails with `EPIPE`
///   instead of killing the daemon.
/// - ignores `SIGXFSZ`: a write past `RLIMIT_FSIZE` fails with `EFBIG` (a failed checkpoint,
///   reported as such) instead of a core dump.
/// - ignores `SIGTTOU`: a daemon started from a shell whose terminal has `stty tostop` writes its
///   log lines instead of being stopped by the first (and then answering nothing, `SIGTERM`
///   included, until a `SIGCONT`).
///
/// `SIGUSR2` is a user signal (`SignalMap.default`). `SIGQUIT` keeps its default (a core dump on
/// request).
///
/// Children: ignored signals and the mask survive `exec`, so a process the daemon starts with
/// `fork`/`exec` or a plain `posix_spawn` runs with `SIGPIPE` ignored (`yes | head` never ends)
/// and `SIGTERM` blocked. Start children with `ChildProcess.spawn` (in `VigilPOSIX`): default
/// dispositions for every signal, an empty mask, and none of the service manager's variables
/// (`NOTIFY_SOCKET`, `WATCHDOG_*`, `LISTEN_*`) unless asked.
///
/// The client subcommands (`check-config`, `reload`, `status`, `--help`, `--version`) are not
/// the daemon: ``settle(arguments:)`` gives them the mask and dispositions they were started
/// with back, so Ctrl-C and `systemctl stop` end them.
///
/// - Important: The block happens in every process that links this product, before any of its
///   code runs: link it into a daemon's executable only, never into a library or a test target
///   (a test target that depends on the daemon's executable target links it too; run the built
///   executable instead, as Tests/vigildTests does).
public enum EarlySignals {
    /// `true` when `arguments` (argv) start the daemon with `DaemonCommandLine`'s grammar: no
    /// subcommand, `run`, or options of the default `run` subcommand.
    package static func runsDaemon(_ arguments: [String]) -> Bool {
        guard let first = arguments.dropFirst().first else { return true }
        if first == "run" { return true }
        return first.hasPrefix("-") && !["-h", "--help", "--version"].contains(first)
    }

    /// Keeps the early block for the daemon; gives anything else its original signal state.
    ///
    /// - Parameter arguments: the process's arguments, program name first:
    ///   `CommandLine.arguments`. `run`, no subcommand, or an option of `run` keep the block;
    ///   a client subcommand (`reload`, `status`, `check-config`, …), `--help` and `--version`
    ///   get their signals back.
    public static func settle(arguments: [String]) {
        if !runsDaemon(arguments) { cvigil_early_signals_restore() }
    }

    /// `CLOCK_MONOTONIC` in ns when the signals were blocked, or `nil` if the preinit function
    /// did not run (this product is not linked into the executable).
    package static var blockedAt: UInt64? {
        let time = cvigil_early_signals_blocked_at()
        return time == 0 ? nil : time
    }
}
