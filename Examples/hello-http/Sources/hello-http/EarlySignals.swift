#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The daemon's signals, blocked first thing in `main` (before any thread exists, so every
/// thread inherits the mask): systemd may send `SIGHUP` the moment the process exists, and its
/// default action would kill it. Vigil takes them over when the daemon runs; a blocked signal
/// waits until then. The client commands (`reload`, `status`, `check-config`, `--help`) keep
/// their signals as they were started with.
enum EarlySignals {
    /// Blocks SIGHUP, SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 when `arguments` run the daemon
    /// (no command, `run`, or an option of `run`); ignores SIGPIPE either way.
    static func blockForDaemon(arguments: [String]) {
        signal(SIGPIPE, SIG_IGN)
        let first = arguments.dropFirst().first
        let runsDaemon =
            first == nil || first == "run"
            || (first!.hasPrefix("-") && !["-h", "--help", "--version"].contains(first!))
        guard runsDaemon else { return }
        var set = sigset_t()
        sigemptyset(&set)
        for number in [SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2] { sigaddset(&set, number) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }
}
