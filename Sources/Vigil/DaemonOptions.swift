import VigilLifecycle

/// What `run` gives the closure that builds the daemon.
public struct DaemonOptions: Sendable {
    /// The daemon's name (the `name:` given to ``DaemonCommandLine``): its identifier.
    public let name: String
    /// Its version.
    public let version: String
    /// `--config`, else `$CONFIGURATION_DIRECTORY/<name>.json`, else the embedded default: for
    /// `ConfigurationListener.init(source:)`.
    public let configurationSource: ConfigurationSource
    /// `--state-directory`, else `$STATE_DIRECTORY`, else `/var/lib/<name>` for root,
    /// `$XDG_STATE_HOME/<name>` or `$HOME/.local/state/<name>` for others: created (mode 0700)
    /// and locked before any listener starts.
    public let stateDirectory: String
    /// `--runtime-directory`, else `$RUNTIME_DIRECTORY`, else `/run/<name>` (root) or
    /// `$XDG_RUNTIME_DIR/<name>`: where `status.json` goes (created and checked before any
    /// listener starts).
    public let runtimeDirectory: String
    /// `--reload-signal` (SIGHUP unless set); the library sets it on the daemon.
    package let reloadSignal: ProcessSignal
    /// Logging, bootstrapped for `name`: pass it to ``Daemon``.
    public let logging: DaemonLogging
    /// The runtime status file's writer: add the daemon's own keys with
    /// ``RuntimeStatusWriter/addKeys(_:)``.
    public let status: RuntimeStatusWriter

    /// `<state directory>/state.json`: for `PersistenceListener`.
    public var stateFile: String { stateDirectory + "/state.json" }
}
