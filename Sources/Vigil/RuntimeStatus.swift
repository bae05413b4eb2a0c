import VigilLifecycle
import VigilPlatform

/// A running daemon's status, as `<name> status` and `<name> reload` read it from
/// `<runtime directory>/status.json` (format version 1).
///
/// The file is one JSON object, replaced atomically (written to `status.json.tmp`, then renamed)
/// at every lifecycle event:
///
/// | key | value |
/// | --- | --- |
/// | `formatVersion` | `1`; a reader refuses a file with a larger version (absent in files written before it existed: read as 1) |
/// | `pid` | the daemon's process id |
/// | `processStartTime` | its start time in clock ticks after boot (field 22 of `/proc/<pid>/stat`): `reload` signals `pid` only when the process there started at this time |
/// | `state` | `starting`, `running`, `stopping`, `stopped` or `failed` |
/// | `generation` | the configuration generation in force (1 at start, +1 per applied reload) |
/// | `lastReload` | absent before the first reload; else `result` (`applied` or `rejected`), `reason` (why it was rejected) and `beganMonotonicUsec` (`CLOCK_MONOTONIC` when it began, in µs) |
/// | `startedAt` | `CLOCK_REALTIME` at start, in seconds since the epoch |
/// | `previousShutdownClean` | `false` when the state file shows that the previous run did not stop cleanly |
///
/// A daemon adds keys of its own after these (``RuntimeStatusWriter/addKeys(_:)``); readers
/// ignore keys they do not know. `status --json` prints the file's keys plus `uptimeSeconds`.
public struct RuntimeStatus: Sendable, Equatable {
    /// The format this library writes and reads.
    public static let formatVersion = 1
    /// The file's name in the runtime directory.
    public static let fileName = "status.json"
    /// The most a status file may hold.
    public static let sizeLimit = 256 << 10

    /// The outcome of the last reload.
    public struct Reload: Codable, Sendable, Equatable {
        /// `applied` or `rejected`.
        public var result: String
        /// Why it was rejected; `nil` when applied.
        public var reason: String?
        /// `CLOCK_MONOTONIC` when the reload began, in µs: `reload` waits for a reload that
        /// began after its signal.
        public var beganMonotonicUsec: UInt64

        /// An outcome; `reason` only for a rejection.
        public init(result: String, reason: String?, beganMonotonicUsec: UInt64) {
            self.result = result
            self.reason = reason
            self.beganMonotonicUsec = beganMonotonicUsec
        }
    }

    /// The daemon's process id.
    public var pid: Int32
    /// The daemon's start time in clock ticks after boot; `nil` in files written before it was
    /// recorded (such a daemon cannot be reloaded by the client).
    public var processStartTime: UInt64?
    /// `starting`, `running`, `stopping`, `stopped`, `failed`.
    public var state: String
    /// The configuration generation in force: 1 at start, one more per applied reload.
    public var generation: Int
    /// The last reload's outcome; `nil` before the first.
    public var lastReload: Reload?
    /// `CLOCK_REALTIME` at start, in seconds since the epoch.
    public var startedAt: Int64
    /// `false` when the state file showed that the previous run did not stop cleanly.
    public var previousShutdownClean: Bool
    /// The daemon's own keys, in the order it wrote them.
    package var daemonMembers: [JSONValue.Member] = []

    /// A status with no keys of the daemon's own.
    public init(
        pid: Int32,
        processStartTime: UInt64?,
        state: String,
        generation: Int,
        lastReload: Reload?,
        startedAt: Int64,
        previousShutdownClean: Bool
    ) {
        self.pid = pid
        self.processStartTime = processStartTime
        self.state = state
        self.generation = generation
        self.lastReload = lastReload
        self.startedAt = startedAt
        self.previousShutdownClean = previousShutdownClean
    }

    /// Seconds since start, as of now (saturating: a forged `startedAt` cannot overflow it).
    public var uptimeSeconds: Int64 {
        let (difference, overflow) = Int64(time(nil)).subtractingReportingOverflow(startedAt)
        return overflow ? (startedAt < 0 ? .max : .min) : difference
    }

    /// The daemon's own keys, decoded as `T` (keys `T` does not know are ignored).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONValueDecoder.decode(T.self, from: JSONValue(.object(daemonMembers)), rejectUnknownKeys: false)
    }

    /// The keys this library owns; a daemon's keys must not reuse them.
    package static let libraryKeys: Set<String> = [
        "formatVersion", "pid", "processStartTime", "state", "generation", "lastReload", "startedAt",
        "previousShutdownClean", "uptimeSeconds",
    ]

    /// The library's part of the file, in the order it is written.
    private struct Core: Decodable {
        var formatVersion: Int?
        var pid: Int32
        var processStartTime: UInt64?
        var state: String
        var generation: Int
        var lastReload: Reload?
        var startedAt: Int64
        var previousShutdownClean: Bool
    }

    /// Parses a status file's bytes.
    ///
    /// - Throws: a parse or decoding error naming the key, or ``RuntimeStatusFormatError`` for
    ///   a newer format.
    package static func parse(_ bytes: [UInt8]) throws -> RuntimeStatus {
        let root = try JSONParser.parse(bytes)
        let core = try JSONValueDecoder.decode(Core.self, from: root, rejectUnknownKeys: false)
        if let version = core.formatVersion, version != formatVersion {
            throw RuntimeStatusFormatError(found: version)
        }
        var status = RuntimeStatus(
            pid: core.pid,
            processStartTime: core.processStartTime,
            state: core.state,
            generation: core.generation,
            lastReload: core.lastReload,
            startedAt: core.startedAt,
            previousShutdownClean: core.previousShutdownClean
        )
        if case .object(let members) = root.kind {
            status.daemonMembers = members.filter { !libraryKeys.contains($0.key) }
        }
        return status
    }

    /// Reads `status.json` from a verified directory (see ``TrustedDirectory``).
    package static func read(from directory: TrustedDirectory) throws -> RuntimeStatus {
        try parse(try directory.read(fileName, limit: sizeLimit))
    }

    /// The file's JSON object: the library's keys, then the daemon's. Built directly, not
    /// through `Encodable`: it is written after every lifecycle event; keys and values are those
    /// `Core` reads back (a `nil` optional leaves its key out).
    package func document() -> JSONValue {
        func number(_ value: some BinaryInteger) -> JSONValue { JSONValue(.number("\(value)")) }
        func member(_ key: String, _ value: JSONValue) -> JSONValue.Member { .init(key: key, value: value) }
        var members = [member("formatVersion", number(Self.formatVersion)), member("pid", number(pid))]
        if let processStartTime { members.append(member("processStartTime", number(processStartTime))) }
        members.append(member("state", JSONValue(.string(state))))
        members.append(member("generation", number(generation)))
        if let lastReload {
            var reload = [member("result", JSONValue(.string(lastReload.result)))]
            if let reason = lastReload.reason { reload.append(member("reason", JSONValue(.string(reason)))) }
            reload.append(member("beganMonotonicUsec", number(lastReload.beganMonotonicUsec)))
            members.append(member("lastReload", JSONValue(.object(reload))))
        }
        members.append(member("startedAt", number(startedAt)))
        members.append(member("previousShutdownClean", JSONValue(.bool(previousShutdownClean))))
        return JSONValue(.object(members + daemonMembers))
    }

    /// What `status --json` prints: the file's keys plus `uptimeSeconds`.
    package func json() throws -> String {
        var value = document()
        if case .object(var members) = value.kind {
            members.append(.init(key: "uptimeSeconds", value: JSONValue(.number("\(uptimeSeconds)"))))
            value.kind = .object(members)
        }
        return JSONWriter.write(value)
    }
}

/// A status file in a format this library does not read.
public struct RuntimeStatusFormatError: Error, CustomStringConvertible {
    /// The file's `formatVersion`.
    public var found: Int
    /// What happened and what to do.
    public var description: String {
        "the status file has format version \(found), this client reads version \(RuntimeStatus.formatVersion): use the daemon's own client"
    }
}
