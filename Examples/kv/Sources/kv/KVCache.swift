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

    /// `STATS`'s answer: `STATS hits H misses M entries E`.
    var statistics: String {
        state.withLock { "STATS hits \($0.hits) misses \($0.misses) entries \($0.entries.count)" }
    }
}

/// The cache as a listener: on memory pressure (systemd's `MemoryPressureWatch=`, delivered by
/// the daemon as an event), it drops every entry and logs how many (`KV_CACHE_DROPPED`).
struct KVCacheListener: Listener {
    let name = "cache"
    let cache: KVCache

    func memoryPressure(context: ListenerContext) async throws {
        let dropped = cache.removeAll()
        context.logger.notice(
            "Memory pressure: dropped the read cache (\(dropped) entries); GETs read from SQLite until it warms up",
            metadata: ["kv.cache_dropped": "\(dropped)"]
        )
    }
}
