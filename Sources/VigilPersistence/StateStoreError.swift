import VigilPOSIX
import VigilPlatform

/// What keeps a ``StateStore`` from opening its file, storing a key or handing back a value.
///
/// One type with a ``Code``; the ``description`` says what happened and what to do (the file,
/// line and column, the key, where the file was moved), with control characters from the file
/// escaped.
public struct StateStoreError: Error, Hashable, CustomStringConvertible {
    /// What kind of failure this is; compare with the static members.
    public struct Code: Hashable, Sendable {
        private enum Base: Hashable, Sendable {
            case newerFormat, invalidFile, unreadable, invalidKey, invalidEntry, tooLarge
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The file was written by a newer version (its `formatVersion` is higher than this
        /// build reads); it is left as it is.
        package static let newerFormat = Self(.newerFormat)
        /// The file does not parse or does not have the expected shape (it is moved aside).
        package static let invalidFile = Self(.invalidFile)
        /// The file could not be read for a reason that passes (a lease, `EIO`, no
        /// descriptors); it is left as it is and the open fails.
        package static let unreadable = Self(.unreadable)
        /// ``StateStore/set(_:forKey:)`` cannot store the key (`formatVersion`, or one the
        /// file's reader would refuse).
        package static let invalidKey = Self(.invalidKey)
        /// A stored value does not decode as the listener's type, or its validation rejects it.
        package static let invalidEntry = Self(.invalidEntry)
        /// More than the state file may hold, so that the reader at the next start would refuse
        /// it: ``StateStore/set(_:forKey:)`` refuses a value over 16 MiB or nested too deeply
        /// (nothing is stored), and ``StateStore/checkpoint(force:)`` a state over 16 MiB (the
        /// file keeps the previous checkpoint). The description names the key or the largest
        /// values.
        public static let tooLarge = Self(.tooLarge)
    }

    /// What kind of failure this is.
    public let code: Code
    /// The state file; empty when the bytes came from `StateStore/parse(_:)` or for a key.
    public internal(set) var path: String = ""
    /// `heartbeat.count`: the listener's key, then the path inside its value (`formatVersion`,
    /// or empty for the whole file).
    package var keyPath: String = ""
    /// 1-based line and column in the file, 0 when unknown.
    package var line = 0
    package var column = 0
    /// What was expected and what was found, or why a key cannot be stored.
    package var reason: String = ""
    /// Where the state file (its bytes as read at open) was moved, when a stored value did not
    /// decode or validate (``StateStore/value(_:forKey:validate:)``): the file to look at, or
    /// `nil` when nothing was moved.
    public internal(set) var movedAside: String?
    /// The format version found, for ``Code/newerFormat``.
    package var version = 0
    /// The key as given, for ``Code/invalidKey`` and a ``Code/tooLarge`` from
    /// ``StateStore/set(_:forKey:)``.
    package var key: String = ""
    /// The failed read, for ``Code/unreadable``.
    package var cause: SystemError?

    private init(_ code: Code) { self.code = code }

    package static func newerFormat(path: String, version: Int) -> Self {
        var error = Self(.newerFormat)
        error.path = path
        error.version = version
        return error
    }

    package static func invalidFile(line: Int, column: Int, keyPath: String, reason: String) -> Self {
        var error = Self(.invalidFile)
        (error.line, error.column, error.keyPath, error.reason) = (line, column, keyPath, reason)
        return error
    }

    package static func unreadable(path: String, cause: SystemError) -> Self {
        var error = Self(.unreadable)
        error.path = path
        error.cause = cause
        return error
    }

    package static func invalidKey(key: String, reason: String) -> Self {
        var error = Self(.invalidKey)
        error.key = key
        error.reason = reason
        return error
    }

    /// A value ``StateStore/set(_:forKey:)`` refuses to store under `key`.
    package static func tooLarge(key: String, reason: String) -> Self {
        var error = Self(.tooLarge)
        error.key = key
        error.reason = reason
        return error
    }

    /// A checkpoint to `path` that was not written.
    package static func tooLarge(path: String, reason: String) -> Self {
        var error = Self(.tooLarge)
        error.path = path
        error.reason = reason
        return error
    }

    package static func invalidEntry(
        path: String,
        keyPath: String,
        line: Int,
        column: Int,
        reason: String,
        movedAside: String? = nil
    ) -> Self {
        var error = Self(.invalidEntry)
        (error.path, error.keyPath, error.line, error.column) = (path, keyPath, line, column)
        error.reason = reason
        error.movedAside = movedAside
        return error
    }

    public var description: String {
        switch code {
        case .newerFormat:
            return "\(path.isEmpty ? "The state file" : path) was written by a newer version (format \(version); "
                + "this build reads up to \(StateStore.formatVersion)). "
                + "Upgrade this program, or move the file away to start from empty state."
        case .invalidFile:
            var text = line > 0 ? "line \(line), column \(column): " : ""
            if !keyPath.isEmpty { text += keyPath + ": " }
            return DisplayText.escapingControlCharacters(text + reason)
        case .unreadable:
            let errno = cause?.errno ?? 0
            if errno == EISDIR {
                return DisplayText.escapingControlCharacters(
                    "the state file \(path) is a directory: the path must name a file in it (DaemonOptions.stateFile, "
                        + "not stateDirectory); the directory was left as it is"
                )
            }
            let hint = errno == EAGAIN ? " (another process holds a lease or lock on it: end that process)" : ""
            return DisplayText.escapingControlCharacters(
                "cannot read the state file \(path) now: \(cause?.reason ?? "")\(hint); it was left as it is, start again once it reads"
            )
        case .invalidKey:
            return "cannot store the key \(DisplayText.quoted(key, limit: 16)): \(reason)"
        case .tooLarge where path.isEmpty:
            return "cannot store the key \(DisplayText.quoted(key, limit: 16)): \(reason)"
        case .tooLarge:
            return DisplayText.escapingControlCharacters("cannot write a checkpoint to \(path): \(reason)")
        default:
            let place = line > 0 ? ":\(line):\(column)" : ""
            let aside = movedAside.map { "; moved the file to \($0)" } ?? ""
            return DisplayText.escapingControlCharacters("\(path)\(place): \(keyPath): \(reason)\(aside)")
        }
    }
}
