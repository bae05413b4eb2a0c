import Logging
import Synchronization
import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// The key under which the configuration in force is shared: `context.values[CurrentConfiguration<MyConfig>.self]`
/// (and, during a reload, the proposed one in `reload.proposed`).
public enum CurrentConfiguration<Configuration: ValidatedConfiguration>: ValueKey {
    public typealias Value = Configuration
}

/// Where a daemon's configuration comes from.
public enum ConfigurationSource: Sendable, Hashable, CustomStringConvertible {
    /// A file. When `required` is false and nothing exists at the path (not even a dangling
    /// symbolic link) in a directory that exists and can be searched, the embedded default is
    /// used; any other failure to read the file is an error.
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
/// Only "no file at the optional path" means the embedded default. A configured file that
/// cannot be read (a dangling symbolic link, a link loop, a directory the daemon may not
/// search, a FIFO) fails the start or rejects the reload with the path and the reason. A file
/// that was in force and has been deleted rejects the reload too: the running configuration
/// stays in force until the admin writes `{}` (every default) or a new file.
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
    /// Whether the configuration in force, and the one proposed by a pending reload, came from
    /// the file (rather than the embedded default).
    private let fromFile = Mutex<(inForce: Bool, proposed: Bool)>((false, false))
    /// The bytes last decoded from the file and what they decoded to (before validation).
    private let lastDecoded = Mutex<(bytes: [UInt8], configuration: Configuration)?>(nil)

    /// Creates the listener for `source`.
    public init(source: ConfigurationSource) {
        self.source = source
    }

    /// Loads the configuration from the source, as start and reload do.
    public func load() throws(ConfigurationError) -> Configuration {
        try loadNoting().configuration
    }

    private func loadNoting() throws(ConfigurationError) -> (configuration: Configuration, fromFile: Bool) {
        switch source {
        case .embeddedDefault:
            return (Configuration.defaultConfiguration, false)
        case .file(let path, let required):
            do {
                return (try load(path: path), true)
            } catch {
                // Absence is asked only after the read failed: a reload of a file that is
                // there walks its path once (open), not twice (lstat, then open).
                if !required && error.cause?.errno == ENOENT && FileSystem.isAbsent(path) {
                    return (Configuration.defaultConfiguration, false)
                }
                throw error
            }
        }
    }

    /// Reads the file every time; decodes it only when its bytes differ from the last ones
    /// decoded (a reload of an unchanged file, as after log rotation, skips parsing and
    /// decoding: most of a reload's work) and the type says its decoding depends on nothing
    /// but the bytes (``ValidatedConfiguration/decodesFromTheFileAlone``); validation runs
    /// every time, and a failure takes the full path, which names the key,
    /// line and column.
    private func load(path: String) throws(ConfigurationError) -> Configuration {
        let bytes = try loader.read(path: path)
        if Configuration.decodesFromTheFileAlone, let last = lastDecoded.withLock({ $0 }), last.bytes == bytes,
            (try? last.configuration.validate()) != nil
        {
            return last.configuration
        }
        let configuration = try loader.decode(bytes, file: path)
        if Configuration.decodesFromTheFileAlone { lastDecoded.withLock { $0 = (bytes, configuration) } }
        return configuration
    }

    public func start(context: ListenerContext) async throws {
        let (configuration, loadedFromFile) = try loadNoting()
        fromFile.withLock { $0 = (loadedFromFile, false) }
        context.values[CurrentConfiguration<Configuration>.self] = configuration
        context.logger.info(
            "Configuration generation \(context.generation) loaded from \(describeSource(fromFile: loadedFromFile))",
            metadata: ["VIGIL_GENERATION": "\(context.generation)", "VIGIL_CONFIGURATION": "\(source)"]
        )
    }

    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        // The file is read first and its absence asked only when that fails: a reload of a file
        // that is there walks its path once (open), not twice (lstat, then open).
        let inForce = fromFile.withLock { $0.inForce }
        do {
            let (configuration, loadedFromFile) = try loadNoting()
            if inForce && !loadedFromFile, case .file(let path, _) = source {
                return .reject(reason: Self.noLongerExists(path))
            }
            reload.proposed[CurrentConfiguration<Configuration>.self] = configuration
            fromFile.withLock { $0.proposed = loadedFromFile }
            return .accept
        } catch {
            if inForce, case .file(let path, _) = source, error.cause?.errno == ENOENT, FileSystem.isAbsent(path) {
                return .reject(reason: Self.noLongerExists(path))
            }
            return .reject(reason: error.description)
        }
    }

    private static func noLongerExists(_ path: String) -> String {
        ConfigurationError(
            file: path,
            keyPath: "",
            reason:
                "the file no longer exists; the running configuration stays in force; write {} to run on the defaults"
        ).description
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        context.values[CurrentConfiguration<Configuration>.self] = try reload.proposed.require(
            CurrentConfiguration<Configuration>.self
        )
        fromFile.withLock { $0.inForce = $0.proposed }
    }

    private func describeSource(fromFile: Bool) -> String {
        if case .file(let path, _) = source, !fromFile {
            return "the embedded default (\(path) does not exist)"
        }
        return source.description
    }
}
