import GRDB

/// The values, in one SQLite table through GRDB. A write returns once SQLite has committed it
/// with `synchronous = FULL` in WAL mode: the commit is on disk (fsync) before the client hears
/// `OK`, so `kill -9` (or a power loss) after an acknowledged `SET` loses nothing.
final class KVStore: Sendable {
    private let pool: DatabasePool

    /// Opens (or creates) the database at `path`.
    init(path: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
        }
    }

    func get(_ key: String) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT value FROM kv WHERE key = ?", arguments: [key])
        }
    }

    /// Stores `value` under `key`; returns after the commit.
    func set(_ key: String, _ value: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [key, value]
            )
        }
    }

    /// Deletes `key`; true when it existed. Returns after the commit.
    func delete(_ key: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM kv WHERE key = ?", arguments: [key])
            return db.changesCount > 0
        }
    }
}
