import Logging
import Synchronization

/// A log level shared by every handler Vigil makes, adjustable while the daemon runs
/// (the logging listener applies `logLevel` from the configuration on every reload; a daemon
/// sets it through `DaemonLogging.level`).
package final class LogLevelControl: Sendable {
    private let storage: Atomic<UInt8>

    /// Creates a control starting at `level`.
    package init(_ level: Logger.Level = .info) {
        storage = Atomic(Self.code(level))
    }

    /// The level in force.
    package var level: Logger.Level {
        get { Self.levels[Int(storage.load(ordering: .relaxed))] }
        set { storage.store(Self.code(newValue), ordering: .relaxed) }
    }

    private static let levels = Logger.Level.allCases

    private static func code(_ level: Logger.Level) -> UInt8 {
        UInt8(levels.firstIndex(of: level)!)
    }
}

extension Logger.Level {
    /// The syslog priority journald and sd-daemon(3) prefixes use: trace and debug → 7,
    /// info → 6, notice → 5, warning → 4, error → 3, critical → 2.
    package var syslogPriority: Int {
        switch self {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
