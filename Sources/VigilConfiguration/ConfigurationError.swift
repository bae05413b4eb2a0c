import VigilPOSIX

/// Why a configuration file cannot be used: the file, the key, where it is, and the reason in
/// words an admin can act on.
///
/// Its description reads like a compiler's: `/etc/vigild/vigild.json:4:17: heartbeat.interval:
/// must be greater than 0 (found -1)`.
package struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file, or `(embedded default)`.
    package var file: String
    /// The key path, `heartbeat.interval`; empty for the whole file.
    package var keyPath: String
    /// 1-based line and column where known, else 0.
    package var line: Int
    package var column: Int
    /// The reason.
    package var reason: String
    /// The failed system call when the file could not be read (its `errno`, the operation and
    /// the path), else `nil`.
    package var cause: SystemError?

    package init(
        file: String,
        keyPath: String,
        line: Int = 0,
        column: Int = 0,
        reason: String,
        cause: SystemError? = nil
    ) {
        self.file = file
        self.keyPath = keyPath
        self.line = line
        self.column = column
        self.reason = reason
        self.cause = cause
    }

    /// The error on one line: control characters in any part (a path from the command line, a
    /// key or a value from the file) are escaped, so the text can go to a terminal, the journal
    /// or `STATUS=` without forging lines.
    package var description: String {
        var text = file
        if line > 0 { text += ":\(line):\(column)" }
        text += ": "
        if !keyPath.isEmpty { text += keyPath + ": " }
        return DisplayText.escapingControlCharacters(text + reason)
    }
}

/// A value that is well-formed but not acceptable; throw it from ``ValidatedConfiguration/validate()``.
public struct InvalidValue: Error, Hashable, Sendable {
    /// The key path as components: `["heartbeat", "interval"]`.
    package var keyPath: [String]
    /// What is wrong, what is allowed and what was found: "must be greater than 0 (found -1)".
    /// The library adds nothing to it: a reason names the value found itself, text from the file
    /// through `DisplayText.quoted(_:limit:)` (escaped, quoted and cut, as the library's own
    /// messages quote it).
    package var reason: String

    public init(_ keyPath: [String], _ reason: String) {
        self.keyPath = keyPath
        self.reason = reason
    }
}

/// A configuration type: `Decodable` with its own checks, and a default for a daemon that runs
/// with no file.
///
/// Keys left out of a file take their defaults: either declare the type
/// ``DefaultedConfiguration`` (a synthesized `Codable` is then enough), or write `init(from:)`
/// with `KeyedDecodingContainer.decode(_:forKey:default:)`, which takes the default only for a
/// key that is absent (`decodeIfPresent` would take `null` for absent too, so a file's
/// `"interval": null` would run silently on the default). Keys the type never asks for are
/// errors, so typos do not go unnoticed.
///
/// A reload re-reads the file every time but, by default, decodes it only when its bytes
/// changed (``validate()`` runs every time): decoding is most of a reload's work, and a
/// configuration is usually its file's bytes and nothing else. A type whose `init(from:)` reads
/// anything else (an environment variable, a file a key names, the clock) returns `false` from
/// ``decodesFromTheFileAlone``, and is decoded on every reload.
public protocol ValidatedConfiguration: Decodable, Sendable, Equatable {
    /// The configuration used when there is no file.
    static var defaultConfiguration: Self { get }

    /// Whether decoding depends on nothing but the file's bytes, so that a reload of an
    /// unchanged file may keep the value decoded before; `true` unless the type says otherwise.
    static var decodesFromTheFileAlone: Bool { get }

    /// Throws ``InvalidValue`` naming the first key whose value is not acceptable.
    func validate() throws(InvalidValue)
}

extension ValidatedConfiguration {
    public static var decodesFromTheFileAlone: Bool { true }
}

/// A configuration whose every key is optional: a key the file leaves out (at any depth) takes
/// its value from ``ValidatedConfiguration/defaultConfiguration``, so the synthesized `Codable`
/// conformance is all a type needs.
///
/// ```swift
/// struct Settings: DefaultedConfiguration {
///     var greeting = "hello"      // `{}` gives "hello"; `{"greeting": "hi"}` gives "hi"
///     var interval = 5.0
///     static let defaultConfiguration = Settings()
///     func validate() throws(InvalidValue) {}
/// }
/// ```
///
/// The loader encodes the default, lays the file's members over it (objects merged key by key,
/// any other value replaced whole) and decodes the result: a plain `Decodable` type with a
/// key that has a default in Swift would otherwise fail on `{}` with "the required key … is
/// missing". Errors still name the file's line and column; unknown keys are still errors.
public protocol DefaultedConfiguration: ValidatedConfiguration, Encodable {}

extension KeyedDecodingContainer {
    /// The value for `key`, or `defaultValue` when the key is absent.
    ///
    /// A key that is there is decoded as it is: `null` is an error ("expected a number, found
    /// null") unless `T` is an `Optional`, as for a plain `decode`. It was taken as absent, so
    /// `{"interval": null}` ran silently on the default where `{"interval": "5"}` was refused.
    public func decode<T: Decodable>(_ type: T.Type, forKey key: Key, default defaultValue: T) throws -> T {
        guard contains(key) else { return defaultValue }
        return try decode(type, forKey: key)
    }
}
