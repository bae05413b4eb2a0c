import VigilPOSIX
import VigilPlatform

/// Reads, decodes and validates a configuration file into the daemon author's own type.
///
/// The format is JSON with `//` and `/* */` comments and trailing commas. Every failure is a
/// ``ConfigurationError`` naming the file, the key path, the line and column, and the reason:
/// unreadable file, empty file, syntax error, wrong top-level type, wrong value type, unknown
/// key (with "did you mean"), invalid value.
package struct ConfigurationLoader<Configuration: ValidatedConfiguration>: Sendable {
    /// Creates a loader.
    package init() {}

    /// Loads `path`: a regular file (a symbolic link to one is fine) of at most
    /// `FileSystem.configurationLimit` bytes. A FIFO, socket, device or directory is refused
    /// without blocking, naming its kind; so is a file that cannot be read, with the OS's reason.
    package func load(path: String) throws(ConfigurationError) -> Configuration {
        try decode(try read(path: path), file: path)
    }

    /// The bytes of `path`, refused as ``load(path:)`` refuses them (the reading half of it).
    package func read(path: String) throws(ConfigurationError) -> [UInt8] {
        do {
            return try FileSystem.read(path, limit: FileSystem.configurationLimit)
        } catch {
            let reason =
                error.errno == ENOENT && FileSystem.isSymbolicLink(path)
                ? "it is a symbolic link whose target does not exist"
                : error.reason
            throw ConfigurationError(file: path, keyPath: "", reason: "cannot read the file: \(reason)", cause: error)
        }
    }

    /// The bytes of the configuration file open at `opened` (opened with
    /// `FileSystem.readFlags()`); `path` names it in errors.
    package func read(opened: consuming FileDescriptor, path: String) throws(ConfigurationError) -> [UInt8] {
        do {
            return try FileSystem.read(opened: opened, path: path, limit: FileSystem.configurationLimit)
        } catch {
            throw ConfigurationError(
                file: path,
                keyPath: "",
                reason: "cannot read the file: \(error.reason)",
                cause: error
            )
        }
    }

    /// Decodes configuration text; `file` names it in errors.
    package func decode(_ bytes: [UInt8], file: String) throws(ConfigurationError) -> Configuration {
        let root = try ConfigurationText.parse(bytes, file: file)
        let configuration: Configuration
        do {
            var decoded = root
            if let defaults = Configuration.defaultConfiguration as? any DefaultedConfiguration {
                decoded = Self.laid(root, over: try JSONValueEncoder.encode(defaults))
            }
            configuration = try JSONValueDecoder.decode(Configuration.self, from: decoded, rejectUnknownKeys: true)
        } catch let failure as JSONValueDecoder.Failure {
            throw ConfigurationError(
                file: file,
                keyPath: JSONValueDecoder.shown(failure.path),
                line: failure.position.line,
                column: failure.position.column,
                reason: failure.message
            )
        } catch let invalid as InvalidValue {
            throw ConfigurationText.error(invalid, in: root, file: file)
        } catch {
            throw ConfigurationError(file: file, keyPath: "", reason: "\(error)")
        }
        do {
            try configuration.validate()
        } catch {
            throw ConfigurationText.error(error, in: root, file: file)
        }
        return configuration
    }

    /// `file` laid over `defaults`: members of two objects merged key by key (recursively), any
    /// other value of `file` replacing the default whole. The file's members keep their
    /// positions; the defaults' have none (they are never wrong).
    static func laid(_ file: JSONValue, over defaults: JSONValue) -> JSONValue {
        guard case .object(let members) = file.kind, case .object(let defaultMembers) = defaults.kind else {
            return file
        }
        var merged = members
        for member in defaultMembers {
            if let index = merged.lastIndex(where: { $0.key == member.key }) {
                merged[index].value = laid(merged[index].value, over: member.value)
            } else {
                merged.append(member)
            }
        }
        return JSONValue(.object(merged), position: file.position)
    }
}

/// Configuration text parsed into a JSON object, for every reader of configuration files.
package enum ConfigurationText {
    /// `invalid` as a ``ConfigurationError`` naming `file`, the key path, and the line and column
    /// of the key in `root` (of its nearest parent there when the key is absent).
    package static func error(_ invalid: InvalidValue, in root: JSONValue, file: String) -> ConfigurationError {
        let position = JSONValueDecoder.position(of: invalid.keyPath, in: root)
        return ConfigurationError(
            file: file,
            keyPath: invalid.keyPath.joined(separator: "."),
            line: position.line,
            column: position.column,
            reason: invalid.reason
        )
    }

    /// `bytes` parsed (comments, trailing commas, positions); a syntax error, an empty file or a
    /// top level that is not an object is a ``ConfigurationError`` naming `file`, line and column.
    package static func parse(_ bytes: [UInt8], file: String) throws(ConfigurationError) -> JSONValue {
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes, streamSafety: .keysAndValues)
        } catch {
            throw ConfigurationError(
                file: file,
                keyPath: "",
                line: error.position.line,
                column: error.position.column,
                reason: error.message == "the file is empty (only white space or comments)"
                    ? "the file is empty; write {} to use every default, or remove the file"
                    : "not valid JSON: \(error.message)"
            )
        }
        guard case .object = root.kind else {
            throw ConfigurationError(
                file: file,
                keyPath: "",
                line: root.position.line,
                column: root.position.column,
                reason: "the top level must be an object ({ … }), found \(root.summary)"
            )
        }
        return root
    }
}
