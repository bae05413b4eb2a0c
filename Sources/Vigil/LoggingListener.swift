import Logging

/// The standard logging listener: applies the configured log level at start and at every
/// applied reload (the lifecycle entries themselves come from the lifecycle logger that `Daemon` adds).
public struct LoggingListener<Configuration: ValidatedConfiguration>: Listener {
    /// `logging`.
    public let name = "logging"
    public let dependencies: [String]
    private let control: LogLevelControl
    private let level: @Sendable (Configuration) -> Logger.Level

    /// Creates the listener.
    ///
    /// - Parameters:
    ///   - logging: the daemon's logging, whose level every handler shares.
    ///   - configurationListener: the name of the listener that applies the configuration (this
    ///     one starts after it).
    ///   - level: the level the configuration asks for.
    public init(
        logging: DaemonLogging,
        configurationListener: String = "configuration",
        level: @escaping @Sendable (Configuration) -> Logger.Level
    ) {
        self.control = logging.levelControl
        self.dependencies = [configurationListener]
        self.level = level
    }

    public func start(context: ListenerContext) async throws {
        control.level = level(try context.values.require(CurrentConfiguration<Configuration>.self))
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        let new = level(try reload.proposed.require(CurrentConfiguration<Configuration>.self))
        if new != control.level {
            context.logger.notice("Log level is now \(new)", metadata: ["VIGIL_LOG_LEVEL": "\(new)"])
            control.level = new
        }
    }
}
