import Logging
import Synchronization
import VigilEventLoop
import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// The key under which the configuration in force is shared: `context.values[CurrentConfiguration<MyConfig>.self]`
/// (and, during a reload, the proposed one in `reload.proposed`).
public enum CurrentConfiguration<Configuration: ValidatedConfiguration>: ValueKey {
    public typealias Value = Configuration
}

/// Where a daemon's configuration comes from.
public enum ConfigurationSource: Sendable, Hashable {
    /// A file. When `required` is false and nothing exists at the path (not even a dangling
    /// symbolic link) in a directory that exists and can be searched, the embedded default is
    /// used; any other failure to read the file is an error.
    case file(String, required: Bool)
    /// No file: the type's ``ValidatedConfiguration/defaultConfiguration``.
    case embeddedDefault

    /// The path, or `(embedded default)`: for logs.
    package var displayName: String {
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
/// The file is opened and read on a helper thread (see ``init(source:readTimeout:)``): a file on a hung file
/// system (a FUSE daemon that never answers, an NFS hard mount) fails the start or rejects the
/// reload with the path and "did not answer in 5 s", while the daemon goes on answering
/// signals and the watchdog.
///
/// Other listeners declare a dependency on ``name`` and read
/// `context.values[CurrentConfiguration<Configuration>.self]`, or `reload.proposed[…]` while
/// preparing.
public final class ConfigurationListener<Configuration: ValidatedConfiguration>: Listener {
    /// `configuration`: the name other listeners depend on.
    public let name = "configuration"
    /// Where the configuration comes from.
    package let source: ConfigurationSource
    private let loader = ConfigurationLoader<Configuration>()
    /// Whether the configuration in force, and the one proposed by a pending reload, came from
    /// the file (rather than the embedded default).
    private let fromFile = Mutex<(inForce: Bool, proposed: Bool)>((false, false))
    /// The bytes last decoded from the file and what they decoded to (before validation).
    private let lastDecoded = Mutex<(bytes: [UInt8], configuration: Configuration)?>(nil)

    /// How long the file system may take to open and read the file (at start and on each
    /// reload) before the start fails or the reload is rejected: 5 s by default, and never
    /// more than the listener's start or reload budget less a tenth of it (at most 1 s), so
    /// the reason is this listener's and not the mediator's "did not finish within its budget".
    package let readTimeout: Duration

    /// Creates the listener for `source`.
    ///
    /// - Parameters:
    ///   - source: where the file is.
    ///   - readTimeout: how long the file system may take to open and read the file (at start
    ///     and on each reload) before the start fails or the reload is rejected: 5 s by default,
    ///     and never more than the listener's start or reload budget less a tenth of it (at most
    ///     1 s), so the reason is this listener's and not the mediator's.
    public init(source: ConfigurationSource, readTimeout: Duration = .seconds(5)) {
        self.source = source
        self.readTimeout = readTimeout
    }

    /// Loads the configuration from the source, as start and reload do (but on the calling
    /// thread, with no deadline).
    package func load() throws(ConfigurationError) -> Configuration {
        try settle(Self.readFile(source, loader: loader)).configuration
    }

    /// What touching the file found: its bytes, or nothing at the path, or a failure.
    private enum FileRead: Sendable {
        case embeddedDefault
        case bytes(path: String, [UInt8])
        /// Nothing at the path (``FileSystem/isAbsent(_:)``), with the failed read.
        case absent(path: String, required: Bool, ConfigurationError)
        case failed(ConfigurationError)
    }

    /// Everything that touches the file system, so that it runs on a helper thread: the read,
    /// and when it fails with `ENOENT`, whether the path is absent.
    private static func readFile(_ source: ConfigurationSource, loader: ConfigurationLoader<Configuration>) -> FileRead
    {
        guard case .file(let path, let required) = source else { return .embeddedDefault }
        do {
            return .bytes(path: path, try loader.read(path: path))
        } catch {
            // Absence is asked only after the read failed: a reload of a file that is there
            // walks its path once (open), not twice (lstat, then open).
            if error.cause?.errno == ENOENT && FileSystem.isAbsent(path) {
                return .absent(path: path, required: required, error)
            }
            return .failed(error)
        }
    }

    /// ``readFile(_:loader:)`` on the shared helper thread, within `budget`; in place when the
    /// file is on a local file system reached without crossing a mount (`LocalFile`: nothing on
    /// the way can hang, and the hop to the helper thread was most of a reload's round trip).
    private func readFile(budget: Duration) async -> FileRead {
        guard case .file(let path, _) = source else { return .embeddedDefault }
        if let opened = LocalFile.open(path, flags: FileSystem.readFlags()) {
            do {
                return .bytes(path: path, try loader.read(opened: opened, path: path))
            } catch {
                return .failed(error)
            }
        }
        let deadline = min(readTimeout, budget - min(budget / 10, .seconds(1)))
        let (source, loader) = (source, loader)
        switch await BlockingWorker.shared.run(deadline: deadline, { Self.readFile(source, loader: loader) }) {
        case .finished(let read):
            return read
        case .timedOut:
            return .failed(
                Self.unanswered(path, reason: "the file system did not answer in \(deadline.formatted) (a hung mount?)")
            )
        case .cancelled:
            return .failed(Self.unanswered(path, reason: "the read was cancelled before the file system answered"))
        case .unavailable(let why):
            return .failed(Self.unanswered(path, reason: "it was not read: \(why)"))
        }
    }

    private static func unanswered(_ path: String, reason: String) -> ConfigurationError {
        ConfigurationError(
            file: path,
            keyPath: "",
            reason: "cannot read the file: \(reason)",
            cause: SystemError(path: path, operation: "read", errno: ETIMEDOUT, detail: reason)
        )
    }

    /// The configuration from what the read found, and whether it came from the file.
    private func settle(_ read: FileRead) throws(ConfigurationError) -> (configuration: Configuration, fromFile: Bool) {
        switch read {
        case .embeddedDefault: return (Configuration.defaultConfiguration, false)
        case .bytes(let path, let bytes): return (try decode(bytes, path: path), true)
        case .absent(_, let required, let error):
            if required { throw error }
            return (Configuration.defaultConfiguration, false)
        case .failed(let error): throw error
        }
    }

    /// Decodes the file's bytes only when they differ from the last ones decoded (a reload of
    /// an unchanged file, as after log rotation, skips parsing and decoding: most of a
    /// reload's work) and the type says its decoding depends on nothing but the bytes
    /// (``ValidatedConfiguration/decodesFromTheFileAlone``); validation runs every time, and a
    /// failure takes the full path, which names the key, line and column.
    private func decode(_ bytes: [UInt8], path: String) throws(ConfigurationError) -> Configuration {
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
        let read = await readFile(budget: context.budgets(for: name).start)
        let (configuration, loadedFromFile) = try settle(read)
        fromFile.withLock { $0 = (loadedFromFile, false) }
        context.values[CurrentConfiguration<Configuration>.self] = configuration
        context.logger.info(
            "Configuration generation \(context.generation) loaded from \(describeSource(fromFile: loadedFromFile))",
            metadata: ["VIGIL_GENERATION": "\(context.generation)", "VIGIL_CONFIGURATION": "\(source.displayName)"]
        )
    }

    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        let inForce = fromFile.withLock { $0.inForce }
        let read = await readFile(budget: context.budgets(for: name).reload)
        if inForce, case .absent(let path, _, _) = read {
            return .reject(reason: Self.noLongerExists(path))
        }
        do {
            let (configuration, loadedFromFile) = try settle(read)
            reload.proposed[CurrentConfiguration<Configuration>.self] = configuration
            fromFile.withLock { $0.proposed = loadedFromFile }
            return .accept
        } catch {
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
        return source.displayName
    }
}
