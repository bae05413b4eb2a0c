import Configuration
import Synchronization

/// A swift-configuration provider whose values change only when Vigil commits a reload.
///
/// Readers (`ConfigReader(provider:)`) see the committed snapshot; ``SwiftConfigurationListener``
/// replaces it whole in its `commitReload` (never in `prepareReload`, so a rejected file never
/// reaches a reader), and then `watch…` and `watchSnapshot` sequences get the new values: a key's
/// watchers only when its value changed. It never reads a file or takes a signal itself: Vigil owns
/// the reload signal and the two-phase reload (swift-configuration's `ReloadingFileProvider`
/// traps SIGHUP on its own and has no way to reject a file that every listener has not accepted).
package final class CommittedConfigProvider: ConfigProvider, Sendable {
    /// A set of values, as one reload committed them.
    package struct Snapshot: ConfigSnapshot {
        package let providerName: String
        /// The values by key.
        package let values: [AbsoluteConfigKey: ConfigValue]

        /// The value for `key`, converted to `type` where that loses nothing (a whole number read
        /// as a `Double`); any other mismatch is swift-configuration's "not convertible" error.
        package func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
            try Self.lookup(values[key], key: key, type: type)
        }

        static func lookup(_ value: ConfigValue?, key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
            let encodedKey = key.description
            guard let value else { return LookupResult(encodedKey: encodedKey, value: nil) }
            let converted: ConfigContent? =
                switch (value.content, type) {
                case (.string, .string), (.int, .int), (.double, .double), (.bool, .bool), (.bytes, .bytes),
                    (.stringArray, .stringArray), (.intArray, .intArray), (.doubleArray, .doubleArray),
                    (.boolArray, .boolArray), (.byteChunkArray, .byteChunkArray):
                    value.content
                case (.int(let number), .double): .double(Double(number))
                case (.intArray(let numbers), .doubleArray): .doubleArray(numbers.map(Double.init))
                default: nil
                }
            guard let converted else { throw NotConvertible(key: encodedKey, type: type, value: value) }
            return LookupResult(encodedKey: encodedKey, value: ConfigValue(converted, isSecret: value.isSecret))
        }
    }

    /// A value read as a type it cannot be: `http.port: expected int, found the string "x"`.
    package struct NotConvertible: Error, CustomStringConvertible {
        /// The key, dot-separated.
        package var key: String
        /// The type asked for.
        package var type: ConfigType
        /// What the file holds (a secret is not shown).
        package var value: ConfigValue

        package var description: String {
            let found: String =
                switch value.content {
                case _ where value.isSecret: "a secret of another type"
                case .string(let text): "the string \"\(text)\""
                case .int(let number): "the whole number \(number)"
                case .double(let number): "the number \(number)"
                case .bool(let flag): "\(flag)"
                default: "an array of another kind"
                }
            return "\(key): expected \(type.rawValue), found \(found)"
        }
    }

    private struct Watcher {
        var type: ConfigType
        var continuation: AsyncStream<Result<LookupResult, any Error>>.Continuation
    }

    private struct Storage {
        var snapshot: Snapshot
        var nextID = 0
        var valueWatchers: [AbsoluteConfigKey: [Int: Watcher]] = [:]
        var snapshotWatchers: [Int: AsyncStream<any ConfigSnapshot>.Continuation] = [:]
    }

    package let providerName: String
    private let storage: Mutex<Storage>

    /// A provider holding `values` until the first ``commit(_:)``.
    package init(name: String = "vigil", values: [AbsoluteConfigKey: ConfigValue] = [:]) {
        providerName = name
        storage = Mutex(Storage(snapshot: Snapshot(providerName: name, values: values)))
    }

    /// Replaces every value at once, then tells the watchers of each key whose value changed, and
    /// every snapshot watcher, outside the lock.
    package func commit(_ values: [AbsoluteConfigKey: ConfigValue]) {
        let (snapshot, changed, snapshotWatchers) = storage.withLock { storage in
            let old = storage.snapshot.values
            storage.snapshot = Snapshot(providerName: providerName, values: values)
            var changed: [(AbsoluteConfigKey, ConfigValue?, [Watcher])] = []
            for (key, watchers) in storage.valueWatchers where old[key] != values[key] {
                changed.append((key, values[key], Array(watchers.values)))
            }
            return (storage.snapshot, changed, Array(storage.snapshotWatchers.values))
        }
        for (key, value, watchers) in changed {
            for watcher in watchers {
                watcher.continuation.yield(Result { try Snapshot.lookup(value, key: key, type: watcher.type) })
            }
        }
        for continuation in snapshotWatchers { continuation.yield(snapshot) }
    }

    package func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try storage.withLock { $0.snapshot }.value(forKey: key, type: type)
    }

    package func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    package func snapshot() -> any ConfigSnapshot { storage.withLock { $0.snapshot } }

    nonisolated(nonsending) package func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey,
        type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (
                _ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>
            ) async throws -> Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<Result<LookupResult, any Error>>
            .makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = storage.withLock { storage in
            let id = storage.nextID
            storage.nextID += 1
            storage.valueWatchers[key, default: [:]][id] = Watcher(type: type, continuation: continuation)
            continuation.yield(Result { try storage.snapshot.value(forKey: key, type: type) })
            return id
        }
        defer { _ = storage.withLock { $0.valueWatchers[key]?.removeValue(forKey: id) } }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream))
    }

    nonisolated(nonsending) package func watchSnapshot<Return: ~Copyable>(
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws ->
            Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<any ConfigSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = storage.withLock { storage in
            let id = storage.nextID
            storage.nextID += 1
            storage.snapshotWatchers[id] = continuation
            continuation.yield(storage.snapshot)
            return id
        }
        defer { _ = storage.withLock { $0.snapshotWatchers.removeValue(forKey: id) } }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream))
    }
}
