import Configuration
import Logging
import Synchronization
import VigilConfiguration
import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// The configuration listener for a daemon that reads its configuration through
/// swift-configuration (`ConfigReader`), while Vigil owns the reload signal and the two-phase
/// reload.
///
/// ```swift
/// let configuration = SwiftConfigurationListener(source: options.configurationSource) { snapshot in
///     _ = try snapshot.requiredString(forKey: "greeting")  // a rejected file names the key
/// }
/// let greeting = configuration.reader.string(forKey: "greeting", default: "hello")
/// ```
///
/// The file is Vigil's JSON (comments, trailing commas, positions in every error); objects nest
/// keys (`{"http": {"port": 8080}}` is `http.port`), and a value is a string, a whole number
/// (`int`, also readable as a `double`), another number (`double`), a boolean, or an array of one
/// of those kinds. A reload reads and checks the file in `prepareReload`: a file that does not
/// parse, or that `validate` throws for, rejects the reload (so `systemctl reload` fails, through
/// `NAME reload`) and ``reader`` keeps the snapshot in force. Only `commitReload` hands the new
/// values to `provider`, whose watchers (`reader.watchInt(forKey:)`, `watchSnapshot`) then see
/// them. No file at an optional path means no values: the reader's defaults.
public final class SwiftConfigurationListener: Listener {
    /// `configuration`: the name other listeners depend on.
    public let name = "configuration"
    /// Where the configuration comes from.
    package let source: ConfigurationSource
    /// The committed values (the package's tests read them; a daemon reads through `reader`).
    package let provider: CommittedConfigProvider
    /// A reader of the committed values alone.
    public let reader: ConfigReader
    private let validate: @Sendable (ConfigSnapshotReader) throws -> Void
    /// Values prepared by a reload, by generation, until its commit or abort.
    private let proposed = Mutex<[Int: [AbsoluteConfigKey: ConfigValue]]>([:])

    /// A listener for `source`; `validate` checks a loaded file through a reader of its values
    /// alone and throws to reject it (an ``VigilConfiguration/InvalidValue`` is reported at its key's line and column).
    public init(
        source: ConfigurationSource,
        validate: @escaping @Sendable (ConfigSnapshotReader) throws -> Void = { _ in }
    ) {
        self.source = source
        self.validate = validate
        provider = CommittedConfigProvider(name: "vigil: \(source.displayName)")
        reader = ConfigReader(provider: provider)
    }

    /// Loads and validates the values from the source, as start and reload do.
    package func load() throws -> [AbsoluteConfigKey: ConfigValue] {
        guard case .file(let path, let required) = source else { return [:] }
        let bytes: [UInt8]
        do {
            bytes = try ConfigurationLoader<NoConfiguration>().read(path: path)
        } catch {
            if !required && error.cause?.errno == ENOENT && FileSystem.isAbsent(path) { return [:] }
            throw error
        }
        let root = try ConfigurationText.parse(bytes, file: path)
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        try Self.flatten(root, path: [], into: &values, file: path)
        do {
            try validate(ConfigReader(provider: CommittedConfigProvider(values: values)).snapshot())
        } catch let invalid as InvalidValue {
            throw ConfigurationText.error(invalid, in: root, file: path)
        } catch {
            throw ConfigurationError(file: path, keyPath: "", reason: "\(error)")
        }
        return values
    }

    /// Objects become key components; scalars and arrays of one scalar kind become values.
    static func flatten(
        _ value: JSONValue,
        path: [String],
        into values: inout [AbsoluteConfigKey: ConfigValue],
        file: String
    ) throws(ConfigurationError) {
        func failure(_ reason: String, at position: JSONValue.Position) -> ConfigurationError {
            ConfigurationError(
                file: file,
                keyPath: path.joined(separator: "."),
                line: position.line,
                column: position.column,
                reason: reason
            )
        }
        if case .object(let members) = value.kind {
            for member in members {
                try flatten(member.value, path: path + [member.key], into: &values, file: file)
            }
            return
        }
        let content: ConfigContent
        switch value.kind {
        case .object, .null: return
        case .string(let text): content = .string(text)
        case .bool(let flag): content = .bool(flag)
        case .number(let text):
            guard let number = Int(text).map({ ConfigContent.int($0) }) ?? Double(text).map({ .double($0) }) else {
                throw failure("the number \(text) cannot be read", at: value.position)
            }
            content = number
        case .array(let elements):
            let strings = elements.compactMap { if case .string(let text) = $0.kind { text } else { nil } }
            let bools = elements.compactMap { if case .bool(let flag) = $0.kind { flag } else { nil } }
            let numbers = elements.compactMap { if case .number(let text) = $0.kind { Double(text) } else { nil } }
            let ints = elements.compactMap { if case .number(let text) = $0.kind { Int(text) } else { nil } }
            if strings.count == elements.count {
                content = .stringArray(strings)
            } else if bools.count == elements.count {
                content = .boolArray(bools)
            } else if ints.count == elements.count {
                content = .intArray(ints)
            } else if numbers.count == elements.count {
                content = .doubleArray(numbers)
            } else {
                throw failure("an array must hold strings, numbers or booleans, all of one kind", at: value.position)
            }
        }
        if case .double(let number) = content, !number.isFinite {
            throw failure("the number is out of range", at: value.position)
        }
        if case .doubleArray(let numbers) = content, !numbers.allSatisfy(\.isFinite) {
            throw failure("a number in the array is out of range", at: value.position)
        }
        values[AbsoluteConfigKey(path)] = ConfigValue(content, isSecret: false)
    }

    public func start(context: ListenerContext) async throws {
        provider.commit(try load())
        context.logger.info(
            "Configuration generation \(context.generation) loaded from \(source.displayName)",
            metadata: ["VIGIL_GENERATION": "\(context.generation)", "VIGIL_CONFIGURATION": "\(source.displayName)"]
        )
    }

    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        do {
            let values = try load()
            proposed.withLock { $0[reload.generation] = values }
            return .accept
        } catch {
            return .reject(reason: "\(error)")
        }
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        guard let values = proposed.withLock({ $0.removeValue(forKey: reload.generation) }) else { return }
        provider.commit(values)
    }

    public func abortReload(_ reload: ReloadTransaction, context: ListenerContext) async {
        _ = proposed.withLock { $0.removeValue(forKey: reload.generation) }
    }
}

/// The loader's type parameter for reading bytes only (``ConfigurationLoader/read(path:)``).
private struct NoConfiguration: ValidatedConfiguration {
    static let defaultConfiguration = NoConfiguration()
    init() {}
    init(from decoder: any Decoder) throws {}
    func validate() throws(InvalidValue) {}
}
