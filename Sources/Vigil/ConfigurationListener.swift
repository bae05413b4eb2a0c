import Logging

/// The key under which the configuration in force is shared: `context.values[CurrentConfiguration<MyConfig>.self]`
/// (and, during a reload, the proposed one in `reload.proposed`).
public enum CurrentConfiguration<Configuration: ValidatedConfiguration>: ValueKey {
    public typealias Value = Configuration
}

/// Where a daemon's configuration comes from.
public enum ConfigurationSource: Sendable, Hashable, CustomStringConvertible {
    /// A file; when `required` is false and the file does not exist, the embedded default is used.
    case file(String, required: Bool)
    /// No file: the type's ``ValidatedConfiguration/defaultConfiguration``.
    case embeddedDefault

    public var description: String {
        switch self {
        case .file(let path, _): path
        case .embeddedDefault: "(embedded default)"
        }
    }
}

/// The standard configuration listener: loads the daemon's configuration at start and proposes
/// the new one on every reload (two-phase: it rejects a file that does not load, and only a
/// commit makes the proposal current).
///
/// Other listeners declare a dependency on ``name`` and read
/// `context.values[CurrentConfiguration<Configuration>.self]`, or `reload.proposed[…]` while
/// preparing.
public final class ConfigurationListener<Configuration: ValidatedConfiguration>: Listener {
    /// `configuration`: the name other listeners depend on.
    public let name = "configuration"
    /// Where the configuration comes from.
    public let source: ConfigurationSource
    private let loader = ConfigurationLoader<Configuration>()

    /// Creates the listener for `source`.
    public init(source: ConfigurationSource) {
        self.source = source
    }

    /// Loads the configuration from the source, as start and reload do.
    public func load() throws(ConfigurationError) -> Configuration {
        switch source {
        case .embeddedDefault:
            return Configuration.defaultConfiguration
        case .file(let path, let required):
            if !required && !FileSystem.exists(path) { return Configuration.defaultConfiguration }
            return try loader.load(path: path)
        }
    }

    public func start(context: ListenerContext) async throws {
        let configuration = try load()
        context.values[CurrentConfiguration<Configuration>.self] = configuration
        context.logger.info(
            "Configuration generation \(context.generation) loaded from \(describeSource())",
            metadata: ["VIGIL_GENERATION": "\(context.generation)", "VIGIL_CONFIGURATION": "\(source)"]
        )
    }

    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        do {
            reload.proposed[CurrentConfiguration<Configuration>.self] = try load()
            return .accept
        } catch {
            return .reject(reason: error.description)
        }
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        context.values[CurrentConfiguration<Configuration>.self] = try reload.proposed.require(
            CurrentConfiguration<Configuration>.self
        )
    }

    private func describeSource() -> String {
        if case .file(let path, false) = source, !FileSystem.exists(path) {
            return "the embedded default (\(path) does not exist)"
        }
        return source.description
    }
}
