import Logging
import Synchronization
import Vigil

/// The line protocol, one request per line, one answer line per request:
///
/// | request | answer |
/// | --- | --- |
/// | `GET key` | `VALUE value`, or `NOTFOUND` |
/// | `SET key value` | `OK` once committed (the value is the rest of the line, spaces included) |
/// | `DEL key` | `OK` once committed, or `NOTFOUND` |
/// | `STATS` | `STATS hits H misses M entries E`: the read cache since this start |
/// | anything else, a key or value over its limit | `ERR reason` |
///
/// A key is 1 to 256 bytes of UTF-8 without spaces or control characters. The limits in force
/// (`maxValueBytes`, `maxConnections`, `idleTimeout`) are read from the configuration for each
/// request and each connection, so a committed reload applies to the next one. A connection that
/// sends no complete request within `idleTimeout` is answered `ERR idle: …` and closed: idle
/// clients cannot keep the places of `maxConnections` from everyone else. Each request is logged with
/// structured metadata (journal fields `KV_COMMAND`, `KV_KEY`, `KV_RESULT`, `KV_PEER`,
/// `KV_VALUE_BYTES`, `KV_DURATION_US`, and `KV_CACHE` `hit` or `miss` for a `GET`). `GET` reads
/// through a small cache (``KVCache``), which `SET` and `DEL` keep current after their commit.
final class KVServer: Sendable {
    let store: KVStore
    let cache: KVCache
    let values: ValueStore
    let logger: Logger
    /// Connections being served, over every socket.
    private let open = Mutex(0)

    init(store: KVStore, cache: KVCache, values: ValueStore, logger: Logger) {
        self.store = store
        self.cache = cache
        self.values = values
        self.logger = logger
    }

    static let maximumKeyBytes = 256

    /// How long a connection may take to send its next request (`idleTimeout`).
    var idleTimeout: Duration { .seconds(configuration.idleTimeout) }

    var configuration: KVConfiguration {
        values[CurrentConfiguration<KVConfiguration>.self] ?? .defaultConfiguration
    }

    /// Serves one connection until the peer closes it, the daemon stops (an idle connection
    /// ends at once; a request half received may finish until the stop's deadline), or it breaks
    /// the protocol.
    ///
    /// With a `token` (the TCP port), the first line must be `AUTH token`: answered `OK`, else
    /// `ERR unauthorized: …` and the connection closed.
    func serve(_ connection: Connection, token: String? = nil) async {
        defer { connection.close() }
        let limit = configuration.maxConnections
        let admitted = open.withLock { count -> Bool in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else {
            logger.warning(
                "Refused a connection from \(connection.peer): \(limit) connections are open (maxConnections)",
                metadata: ["kv.peer": "\(connection.peer)", "kv.result": "busy"]
            )
            try? await connection.write("ERR busy: \(limit) connections are open (maxConnections); try again later\n")
            return
        }
        defer { open.withLock { $0 -= 1 } }
        do throws(SystemdError) {
            if let token {
                let line = try await connection.readLine(maximumBytes: 4096, timeout: idleTimeout)
                guard let line, Self.constantTimeEqual(line, "AUTH " + token) else {
                    logger.warning(
                        "Refused \(connection.peer): the first line on the TCP port was not AUTH with kv's access token (credential kv-token)",
                        metadata: ["kv.peer": "\(connection.peer)", "kv.result": "unauthorized"]
                    )
                    if line != nil {
                        try await connection.write(
                            "ERR unauthorized: the first line must be AUTH and kv's access token\n"
                        )
                    }
                    return
                }
                try await connection.write("OK\n")
            }
            while true {
                // "SET " + key + " " + value: the longest request the limits allow.
                let longest = 5 + Self.maximumKeyBytes + configuration.maxValueBytes
                guard let line = try await connection.readLine(maximumBytes: longest, timeout: idleTimeout) else {
                    return
                }
                let answer = await handle(line, peer: connection.peer)
                try await connection.write(answer + "\n")
            }
        } catch {
            if error.code == .lineTooLong || error.code == .notUTF8 {
                try? await connection.write("ERR \(error.message)\n")
            } else if error.code == .timedOut {
                let seconds = configuration.idleTimeout
                logger.info(
                    "Closed \(connection): no request within \(seconds) s (idleTimeout)",
                    metadata: ["kv.peer": "\(connection.peer)", "kv.result": "idle"]
                )
                try? await connection.write(
                    "ERR idle: no request within \(seconds) s (idleTimeout); closing\n",
                    timeout: .seconds(1)
                )
                return
            }
            logger.notice("Closed \(connection): \(error)", metadata: ["kv.peer": "\(connection.peer)"])
        }
    }

    /// Answers one request line.
    func handle(_ line: String, peer: String) async -> String {
        let started = ContinuousClock.now
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        let command = parts.first.map(String.init) ?? ""
        let key = parts.count > 1 ? String(parts[1]) : ""
        var valueBytes = 0
        var cached: String?
        let answer: String
        do {
            switch command {
            case "GET" where parts.count == 2:
                try Self.check(key: key)
                if let value = cache.lookup(key) {
                    cached = "hit"
                    answer = "VALUE \(value)"
                } else {
                    cached = "miss"
                    let value = try await store.get(key)
                    if let value { cache.keep(key, value) }
                    answer = value.map { "VALUE \($0)" } ?? "NOTFOUND"
                }
            case "SET" where parts.count == 3:
                try Self.check(key: key)
                let value = String(parts[2])
                valueBytes = value.utf8.count
                let limit = configuration.maxValueBytes
                guard valueBytes <= limit else {
                    throw Refusal("the value is \(valueBytes) bytes, more than maxValueBytes (\(limit))")
                }
                try await store.set(key, value)
                cache.keep(key, value)
                answer = "OK"
            case "DEL" where parts.count == 2:
                try Self.check(key: key)
                let existed = try await store.delete(key)
                cache.forget(key)
                answer = existed ? "OK" : "NOTFOUND"
            case "STATS" where parts.count == 1:
                answer = cache.statistics
            default:
                throw Refusal(
                    "expected GET key, SET key value, DEL key or STATS (found \(DisplayText.quoted(line, limit: 40)))"
                )
            }
        } catch let refusal as Refusal {
            answer = "ERR \(refusal.reason)"
        } catch {
            logger.error("Storage failed for \(command) \(DisplayText.quoted(key)): \(error)")
            answer = "ERR storage failed: \(error)"
        }
        let elapsed = ContinuousClock.now - started
        let microseconds = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        let result = String(answer.prefix { $0 != " " })
        var metadata: Logger.Metadata = [
            "kv.command": "\(DisplayText.escapingControlCharacters(String(command.prefix(16))))",
            "kv.key": "\(DisplayText.escapingControlCharacters(String(key.prefix(256))))",
            "kv.result": "\(result)",
            "kv.peer": "\(peer)",
            "kv.value_bytes": "\(valueBytes)",
            "kv.duration_us": "\(microseconds)",
        ]
        if let cached { metadata["kv.cache"] = "\(cached)" }
        logger.info("\(command.prefix(16)) \(DisplayText.quoted(key, limit: 64)) → \(result)", metadata: metadata)
        return answer
    }

    private static func check(key: String) throws {
        if let problem = problem(withKey: key) { throw Refusal(problem) }
    }

    /// Why `key` is not a key, or `nil` when it is.
    static func problem(withKey key: String) -> String? {
        let bytes = key.utf8.count
        guard (1...maximumKeyBytes).contains(bytes) else {
            return "a key is 1 to \(maximumKeyBytes) bytes (found \(bytes))"
        }
        guard !key.unicodeScalars.contains(where: { DisplayText.isControl($0) || $0 == " " }) else {
            return "a key has no spaces or control characters (found \(DisplayText.quoted(key)))"
        }
        return nil
    }

    /// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }

    /// The credential kv-token is an empty file.
    struct EmptyToken: Error, CustomStringConvertible {
        var description: String {
            "credential 'kv-token' is empty: put kv's access token in /etc/credstore/kv-token (LoadCredential=kv-token)"
        }
    }

    /// A request refused with a reason for the client.
    private struct Refusal: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
