import Synchronization

/// Durable state that listeners reach through the mediator: each listener keeps its own
/// `Codable` value under its own key, in one JSON file.
///
/// The file is `{"formatVersion": 1, "<key>": <value>, …}`. Writes are crash-safe
/// (``FileSystem/writeAtomically(_:to:beforeRename:)``): after a crash, `kill -9` or power loss
/// the file holds either the previous checkpoint or the new one. Listeners reach the store with
/// `context.values[StateStoreKey.self]` after declaring a dependency on the persistence listener.
public final class StateStore: Sendable {
    /// The format this build writes; files with a greater version are refused.
    public static let formatVersion = 1

    /// The state file.
    public let path: String

    /// What opening the store found.
    public struct Restored: Sendable, Hashable {
        /// Where a corrupt or unreadable file was moved, if it was.
        public var movedAside: String?
        /// Why it was moved aside.
        public var problem: String?
        /// How many keys were restored.
        public var keys: Int
    }

    private struct Storage {
        var entries: [JSONValue.Member] = []
        /// Bumped on every change; a checkpoint records the revision it wrote.
        var revision = 0
        var writtenRevision = 0
        /// The entries as the file holds them (restored, or last checkpointed).
        var written: [JSONValue.Member] = []
    }

    private let storage = Mutex(Storage())
    /// Serialises checkpoints so a later one never writes an older snapshot.
    private let writer = Mutex(0)

    /// An error that keeps the daemon from using the state file.
    public struct NewerFormat: Error, CustomStringConvertible {
        public let path: String
        public let version: Int
        public var description: String {
            "\(path) was written by a newer version (format \(version); this build reads up to \(StateStore.formatVersion)). "
                + "Upgrade this program, or move the file away to start from empty state."
        }
    }

    /// Opens the store: removes a leftover temporary file, restores the file if it exists.
    ///
    /// A file that cannot be read or parsed is moved aside to `<path>.corrupt-<n>` (never
    /// overwritten) and the store starts empty; ``restored`` says so.
    ///
    /// - Throws: ``NewerFormat`` for a file from a newer, incompatible version.
    public init(path: String) throws {
        self.path = path
        try FileSystem.remove(FileSystem.temporaryName(for: path))
        var restored = Restored(movedAside: nil, problem: nil, keys: 0)
        if FileSystem.exists(path) {
            do {
                let root = try JSONParser.parse(try FileSystem.read(path))
                guard case .object(let members) = root.kind else {
                    throw JSONParser.SyntaxError(message: "the top level is not an object", position: root.position)
                }
                let version = root["formatVersion"].flatMap { value -> Int? in
                    if case .number(let text) = value.kind { Int(text) } else { nil }
                }
                guard let version else {
                    throw JSONParser.SyntaxError(message: "formatVersion is missing", position: root.position)
                }
                if version > Self.formatVersion { throw NewerFormat(path: path, version: version) }
                let entries = members.filter { $0.key != "formatVersion" }
                storage.withLock {
                    $0.entries = entries
                    $0.written = entries
                }
                restored.keys = entries.count
            } catch let error as NewerFormat {
                throw error
            } catch {
                let problem: String =
                    if let syntax = error as? JSONParser.SyntaxError {
                        "line \(syntax.position.line), column \(syntax.position.column): \(syntax.message)"
                    } else {
                        "\(error)"
                    }
                var aside = path + ".corrupt-1"
                var number = 1
                while FileSystem.exists(aside) {
                    number += 1
                    aside = path + ".corrupt-\(number)"
                }
                try FileSystem.move(path, to: aside)
                try FileSystem.syncDirectory(of: path)
                restored.movedAside = aside
                restored.problem = problem
            }
        }
        self.restored = restored
    }

    /// What opening found.
    public let restored: Restored

    /// The value stored under `key`, decoded as `type`; `nil` when there is none.
    public func value<T: Decodable>(_ type: T.Type, forKey key: String) throws -> T? {
        guard let stored = storage.withLock({ storage in storage.entries.last { $0.key == key }?.value }) else {
            return nil
        }
        return try JSONValueDecoder.decode(type, from: stored, rejectUnknownKeys: false)
    }

    /// Stores `value` under `key`; it reaches the file at the next checkpoint.
    public func set<T: Encodable>(_ value: T, forKey key: String) throws {
        precondition(key != "formatVersion", "formatVersion is reserved")
        let encoded = try JSONValueEncoder.encode(value)
        storage.withLock { storage in
            if let index = storage.entries.firstIndex(where: { $0.key == key }) {
                storage.entries[index].value = encoded
            } else {
                storage.entries.append(.init(key: key, value: encoded))
            }
            storage.revision += 1
        }
    }

    /// `true` when something changed since the last checkpoint.
    public var hasUnsavedChanges: Bool { storage.withLock { $0.revision != $0.writtenRevision } }

    /// Writes the state to the file, crash-safely.
    ///
    /// - Parameter force: write even when nothing changed.
    /// - Returns: `true` when the file was written.
    @discardableResult
    public func checkpoint(force: Bool = false) throws -> Bool {
        try writer.withLock { _ in
            let (entries, revision, written) = storage.withLock { ($0.entries, $0.revision, $0.writtenRevision) }
            guard force || revision != written else { return false }
            let document = JSONValue(
                .object([.init(key: "formatVersion", value: JSONValue(.number("\(Self.formatVersion)")))] + entries)
            )
            try FileSystem.writeAtomically(Array(JSONWriter.write(document).utf8), to: path)
            storage.withLock {
                if revision > $0.writtenRevision {
                    $0.writtenRevision = revision
                    $0.written = entries
                }
            }
            return true
        }
    }

    /// What the file lacks compared with memory, for a message when a checkpoint fails: each
    /// changed key with its value in memory and on disk, e.g.
    /// `heartbeat = {"count":858} (on disk: {"count":840})`; "nothing" when the file is current.
    public var unsavedSummary: String {
        let (entries, written) = storage.withLock { ($0.entries, $0.written) }
        func text(_ value: JSONValue?) -> String {
            guard let value else { return "absent" }
            let text = JSONWriter.write(value, pretty: false)
            return text.utf8.count <= 200 ? text : String(text.prefix(200)) + "…"
        }
        let changed = entries.compactMap { entry -> String? in
            let old = written.last { $0.key == entry.key }?.value
            guard old.map({ JSONWriter.write($0, pretty: false) }) != JSONWriter.write(entry.value, pretty: false)
            else {
                return nil
            }
            return "\(entry.key) = \(text(entry.value)) (on disk: \(text(old)))"
        }
        return changed.isEmpty ? "nothing" : changed.joined(separator: "; ")
    }
}

/// Where listeners find the ``StateStore``.
public enum StateStoreKey: ValueKey {
    public typealias Value = StateStore
}
