import Logging

/// Where a daemon's log entries go, chosen from the environment and overridable.
package enum LogDestination: Sendable, Hashable {
    /// Native journal entries (stderr is the journal: `JOURNAL_STREAM` matches fd 2).
    case journal
    /// `<N>`-prefixed lines on stderr (under a service manager, stderr not the journal).
    case syslogPrefixedStderr
    /// Readable lines on stderr; colours when stderr is a TTY and `NO_COLOR` is unset.
    case terminal(colors: Bool)

    /// The destination for this environment: the journal when stderr is the journal, prefixed
    /// lines when under a service manager otherwise, readable lines else.
    package static func automatic(_ environment: ServiceManagerEnvironment = .current()) -> Self {
        if environment.stderrIsJournal { return .journal }
        if environment.isUnderServiceManager { return .syslogPrefixedStderr }
        return .terminal(colors: environment.stderrIsTerminal && !environment.noColor)
    }

    /// Parses an override: `journal`, `syslog` (prefixed), `terminal`, `auto`.
    package init?(name: String, environment: ServiceManagerEnvironment = .current()) {
        switch name {
        case "journal": self = .journal
        case "syslog", "prefixed": self = .syslogPrefixedStderr
        case "terminal", "console": self = .terminal(colors: environment.stderrIsTerminal && !environment.noColor)
        case "auto", "automatic": self = .automatic(environment)
        default: return nil
        }
    }

    /// A handler factory for `LoggingSystem.bootstrap`.
    ///
    /// - Parameters:
    ///   - label: the logger's label.
    ///   - identifier: `SYSLOG_IDENTIFIER` for journal entries.
    ///   - levelControl: the shared, run-time adjustable level.
    package func makeHandler(
        label: String,
        identifier: String,
        levelControl: LogLevelControl
    ) -> any LogHandler {
        switch self {
        case .journal:
            JournalLogHandler(label: label, identifier: identifier, levelControl: levelControl)
        case .syslogPrefixedStderr:
            StderrLogHandler(label: label, format: .syslogPrefixed, levelControl: levelControl)
        case .terminal(let colors):
            StderrLogHandler(label: label, format: .terminal(colors: colors), levelControl: levelControl)
        }
    }
}
