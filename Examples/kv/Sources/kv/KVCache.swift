import Logging
import Synchronization
import Vigil

/// A small read cache in front of SQLite: values that `GET` found (or `SET` wrote), at most
/// ``capacity`` of them, with the hits and misses of `GET` counted (`STATS`). It is only a
/// cache: dropping it (on memory pressure) costs a few reads from SQLite, never a value.
final class KVCache: Sendable {
    /// The most entries kept; beyond it, an entry is dropped for each one added.
    static let capacity = 4096

    private struct State {
        var entries: [String: String] = [:]
        var hits = 0
        var misses = 0
    }

    private let state = Mutex(State())

    /// The cached value of `key`, counting a hit or a miss.
    func lookup(_ key: String) -> String? {
        state.withLock { state in
            let value = state.entries[key]
            if value == nil { state.misses += 1 } else { state.hits += 1 }
            return value
        }
    }

    /// Keeps `value` for `key` (after SQLite committed or read it).
    func keep(_ key: String, _ value: String) {
        state.withLock { state in
            if state.entries[key] == nil && state.entries.count >= Self.capacity {
                state.entries.remove(at: state.entries.startIndex)
            }
            state.entries[key] = value
        }
    }

    /// Forgets `key` (after a committed `DEL`).
    func forget(_ key: String) {
        _ = state.withLock { $0.entries.removeValue(forKey: key) }
    }

    /// Drops every entry; returns how many there were.
    func removeAll() -> Int {
        state.withLock { state in
            let count = state.entries.count
            state.entries.removeAll()
            return count
        }
    }

    /// The first line of a snapshot (``encoded()``); one `key value` line per entry follows.
    static let snapshotHeader = "kv-cache 1"

    /// The entries as a snapshot: `kv-cache 1`, then `key value` lines (a key has no spaces, a
    /// value no newline: the protocol's own rules).
    func encoded() -> [UInt8] {
        state.withLock { state in
            var text = Self.snapshotHeader + "\n"
            for (key, value) in state.entries { text += "\(key) \(value)\n" }
            return Array(text.utf8)
        }
    }

    /// Adds the entries of a snapshot ``encoded()`` made, all of them or none: the bytes come
    /// from outside the process, so each line is checked (the header, UTF-8, a valid key, at most
    /// ``capacity`` entries). Returns how many were loaded.
    func load(_ bytes: [UInt8]) throws(SnapshotError) -> Int {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw SnapshotError("it is not UTF-8") }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first == Substring(Self.snapshotHeader) else {
            throw SnapshotError("it does not begin with '\(Self.snapshotHeader)'")
        }
        guard lines.last == "" else { throw SnapshotError("its last line is cut short") }
        lines = Array(lines.dropFirst().dropLast())
        guard lines.count <= Self.capacity else {
            throw SnapshotError("it has \(lines.count) entries, more than the cache's \(Self.capacity)")
        }
        var entries: [String: String] = [:]
        for (number, line) in zip(2..., lines) {
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, KVServer.problem(withKey: String(parts[0])) == nil else {
                throw SnapshotError("line \(number) is not 'key value'")
            }
            entries[String(parts[0])] = String(parts[1])
        }
        state.withLock { state in
            state.entries.merge(entries) { _, restored in restored }
        }
        return entries.count
    }

    /// A snapshot that cannot be loaded, and why.
    struct SnapshotError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// `STATS`'s answer: `STATS hits H misses M entries E`.
    var statistics: String {
        state.withLock { "STATS hits \($0.hits) misses \($0.misses) entries \($0.entries.count)" }
    }
}

/// The cache as a listener. Across `systemctl restart` it stays warm through systemd's
/// file-descriptor store (`StoredSnapshot`, the unit's `FileDescriptorStoreMax=`): stored at
/// terminate (after the server, which depends on it, has drained), restored at start; a snapshot
/// that does not load is ignored with a warning and removed. On memory pressure (systemd's `MemoryPressureWatch=`, delivered by
/// the daemon as an event), it drops every entry and logs how many (`KV_CACHE_DROPPED`).
struct KVCacheListener: Listener {
    let name = "cache"
    let cache: KVCache

    /// The name in systemd's store (`FDNAME=`).
    static let snapshotName = "kv-cache"

    func start(context: ListenerContext) async throws {
        do {
            guard let bytes = try StoredSnapshot.restore(name: Self.snapshotName) else { return }
            let restored = try cache.load(bytes)
            context.logger.info(
                "Restored the read cache from systemd's file-descriptor store (\(restored) entries)",
                metadata: ["kv.cache_restored": "\(restored)"]
            )
        } catch {
            context.logger.warning(
                "Ignored the stored cache snapshot, the cache starts cold: \(error)",
                metadata: ["kv.cache_restored": "0"]
            )
            _ = try? StoredSnapshot.remove(name: Self.snapshotName)
        }
    }

    func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        let bytes = cache.encoded()
        do {
            guard try StoredSnapshot.store(bytes, name: Self.snapshotName) else { return }
            context.logger.info(
                "Stored the read cache in systemd's file-descriptor store (\(bytes.count) bytes) for the next start",
                metadata: ["kv.cache_stored_bytes": "\(bytes.count)"]
            )
        } catch {
            context.logger.warning("Could not store the read cache; the next start begins cold: \(error)")
        }
    }

    func memoryPressure(context: ListenerContext) async throws {
        let dropped = cache.removeAll()
        context.logger.notice(
            "Memory pressure: dropped the read cache (\(dropped) entries); GETs read from SQLite until it warms up",
            metadata: ["kv.cache_dropped": "\(dropped)"]
        )
    }
}
