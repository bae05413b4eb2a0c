/// Why a configuration file cannot be used: the file, the key, where it is, and the reason in
/// words an admin can act on.
///
/// Its description reads like a compiler's: `/etc/vigild/vigild.json:4:17: heartbeat.interval:
/// must be greater than 0 (found -1)`.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file, or `(embedded default)`.
    public var file: String
    /// The key path, `heartbeat.interval`; empty for the whole file.
    public var keyPath: String
    /// 1-based line and column where known, else 0.
    public var line: Int
    public var column: Int
    /// The reason.
    public var reason: String

    public init(file: String, keyPath: String, line: Int = 0, column: Int = 0, reason: String) {
        self.file = file
        self.keyPath = keyPath
        self.line = line
        self.column = column
        self.reason = reason
    }

    public var description: String {
        var text = file
        if line > 0 { text += ":\(line):\(column)" }
        text += ": "
        if !keyPath.isEmpty { text += keyPath + ": " }
        return text + reason
    }
}

/// A value that is well-formed but not acceptable; throw it from ``ValidatedConfiguration/validate()``.
public struct InvalidValue: Error, Hashable, Sendable {
    /// The key path as components: `["heartbeat", "interval"]`.
    public var keyPath: [String]
    /// What is wrong and what is allowed: "must be greater than 0 (found -1)".
    public var reason: String

    public init(_ keyPath: [String], _ reason: String) {
        self.keyPath = keyPath
        self.reason = reason
    }
}

/// A configuration type: `Decodable` with its own checks, and a default for a daemon that runs
/// with no file.
///
/// Keys left out of a file take their defaults: decode them with `decodeIfPresent`
/// (``Swift/KeyedDecodingContainer/decode(_:forKey:default:)`` does it in one call). Keys the
/// type never asks for are errors, so typos do not go unnoticed.
public protocol ValidatedConfiguration: Decodable, Sendable, Equatable {
    /// The configuration used when there is no file.
    static var defaultConfiguration: Self { get }

    /// Throws ``InvalidValue`` naming the first key whose value is not acceptable.
    func validate() throws(InvalidValue)
}

extension KeyedDecodingContainer {
    /// The value for `key`, or `defaultValue` when the key is absent or null.
    public func decode<T: Decodable>(_ type: T.Type, forKey key: Key, default defaultValue: T) throws -> T {
        try decodeIfPresent(type, forKey: key) ?? defaultValue
    }
}
