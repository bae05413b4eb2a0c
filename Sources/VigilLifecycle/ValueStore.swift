import Synchronization

/// A key for a typed value that listeners share through the mediator.
///
/// Declare one per value a daemon hands around, the way `ServiceContextKey` does:
///
/// ```swift
/// enum CurrentConfigurationKey: ValueKey { typealias Value = MyConfiguration }
/// ```
public protocol ValueKey: Sendable {
    /// The type of the value stored under this key.
    associatedtype Value: Sendable
}

/// Typed values that listeners hand each other through the mediator, instead of globals.
///
/// The mediator gives every listener the same store in its ``ListenerContext`` (the current
/// configuration, the state store, …), and each reload a fresh one for the values it proposes
/// (``ReloadTransaction/proposed``). Reads and writes are thread-safe.
public final class ValueStore: Sendable {
    private let storage = Mutex<[ObjectIdentifier: any Sendable]>([:])

    /// An empty store.
    public init() {}

    /// The value stored under `key`, or `nil`.
    public subscript<Key: ValueKey>(key: Key.Type) -> Key.Value? {
        get { storage.withLock { $0[ObjectIdentifier(key)] as? Key.Value } }
        set { storage.withLock { $0[ObjectIdentifier(key)] = newValue } }
    }

    /// The value stored under `key`; throws an error that names the key when
    /// nothing is stored there (usually a missing dependency on the listener that provides it).
    public func require<Key: ValueKey>(
        _ key: Key.Type,
        file: String = #fileID,
        line: Int = #line
    ) throws -> Key.Value {
        guard let value = self[key] else {
            throw ListenerGroupError.missingValue(String(describing: key), file: file, line: line)
        }
        return value
    }
}
