import VigilLifecycle
import VigilPlatform

/// A running daemon's status, as `<name> status` and `<name> reload` read it from
/// `<runtime directory>/status.json` (format version 2).
///
/// The file is one JSON object, replaced atomically (written to `status.json.tmp`, then renamed)
/// at every lifecycle event:
///
/// | key | value |
/// | --- | --- |
/// | `formatVersion` | `2`; a reader refuses a file with a larger version (absent in files written before it existed: read as 1) |
/// | `pid` | the daemon's process id |
/// | `processStartTime` | its start time in clock ticks after boot (field 22 of `/proc/<pid>/stat`): `reload` signals `pid` only when the process there started at this time |
/// | `state` | `starting`, `running`, `stopping`, `stopped` or `failed` |
/// | `generation` | the configuration generation in force (1 at start, +1 per applied reload) |
/// | `lastReload` | absent before the first reload; else `result` (`applied` or `rejected`), `reason` (why it was rejected) and `beganMonotonicUsec` (`CLOCK_MONOTONIC` when it began, in µs) |
/// | `startedAt` | `CLOCK_REALTIME` at start, in seconds since the epoch |
/// | `reloadSignal` | the signal the daemon reloads on (`SIGHUP`, or what `--reload-signal` chose): what `reload` sends without `--signal`; absent in files written before it existed (read as `SIGHUP`) |
/// | `previousShutdownClean` | `false` when the daemon's state showed that the previous run did not stop cleanly, `true` when it stopped cleanly; absent while unknown (before the state was read, or for a daemon that keeps no `ShutdownMarker`) |
/// | `daemon` | the daemon's own keys (``RuntimeStatusWriter/addKeys(_:)``), an object of their own: no key of a daemon can collide with the library's |
///
/// Readers ignore keys they do not know. Version 1 (before November 2026) had the daemon's keys
/// at the top level beside the library's, where a colliding key was dropped; readers still read
/// it. `status --json` prints the file's keys, then (so that scripts written against version 1
/// keep working) each of the daemon's keys again at the top level unless the library owns that
/// name, then `uptimeSeconds`.
public struct RuntimeStatus: Sendable, Equatable {
    /// The format this library writes and reads.
    package static let formatVersion = 2
    /// The key that holds the daemon's own keys.
    package static let daemonKey = "daemon"
    /// The file's name in the runtime directory.
    package static let fileName = "status.json"
    /// The most a status file may hold.
    package static let sizeLimit = 256 << 10

    /// The outcome of the last reload.
    package struct Reload: Codable, Sendable, Equatable {
        /// `applied` or `rejected`.
        package var result: String
        /// Why it was rejected; `nil` when applied.
        package var reason: String?
        /// `CLOCK_MONOTONIC` when the reload began, in µs: `reload` waits for a reload that
        /// began after its signal.
        package var beganMonotonicUsec: UInt64

        /// An outcome; `reason` only for a rejection.
        package init(result: String, reason: String?, beganMonotonicUsec: UInt64) {
            self.result = result
            self.reason = reason
            self.beganMonotonicUsec = beganMonotonicUsec
        }
    }

    /// The daemon's process id.
    package var pid: Int32
    /// The daemon's start time in clock ticks after boot; `nil` in files written before it was
    /// recorded (such a daemon cannot be reloaded by the client).
    package var processStartTime: UInt64?
    /// `starting`, `running`, `stopping`, `stopped`, `failed`.
    package var state: String
    /// The configuration generation in force: 1 at start, one more per applied reload.
    package var generation: Int
    /// The last reload's outcome; `nil` before the first.
    package var lastReload: Reload?
    /// `CLOCK_REALTIME` at start, in seconds since the epoch.
    package var startedAt: Int64
    /// The signal the daemon reloads on, as `ProcessSignal.description` spells it (`SIGHUP`,
    /// `SIGRTMIN+3`); `nil` in files written before it was recorded.
    package var reloadSignal: String?
    /// `false` when the daemon's state showed that the previous run did not stop cleanly,
    /// `true` when it stopped cleanly, `nil` while unknown (see `ShutdownMarker`).
    package var previousShutdownClean: Bool?
    /// The daemon's own keys, in the order it wrote them.
    package var daemonMembers: [JSONValue.Member] = []

    /// A status with no keys of the daemon's own.
    package init(
        pid: Int32,
        processStartTime: UInt64?,
        state: String,
        generation: Int,
        lastReload: Reload?,
        startedAt: Int64,
        previousShutdownClean: Bool?
    ) {
        self.pid = pid
        self.processStartTime = processStartTime
        self.state = state
        self.generation = generation
        self.lastReload = lastReload
        self.startedAt = startedAt
        self.previousShutdownClean = previousShutdownClean
    }

    /// Seconds since start, as of now: from ``processStartTime`` on the boot-relative clock
    /// (`CLOCK_BOOTTIME`, which a step of the wall clock does not move), else from `startedAt`
    /// on the wall clock; never negative, and saturating (a forged value cannot overflow it).
    package var uptimeSeconds: Int64 { uptimeSeconds(bootTimeTicks: Self.bootTimeTicks()) }

    /// ``uptimeSeconds`` with the boot-relative clock given, in clock ticks (tests step it).
    package func uptimeSeconds(bootTimeTicks now: (ticks: UInt64, perSecond: UInt64)?) -> Int64 {
        if let started = processStartTime, let now, now.perSecond > 0 {
            return now.ticks > started ? Int64(clamping: (now.ticks - started) / now.perSecond) : 0
        }
        let (difference, overflow) = Int64(time(nil)).subtractingReportingOverflow(startedAt)
        return overflow ? (startedAt < 0 ? .max : 0) : max(0, difference)
    }

    /// `CLOCK_BOOTTIME` now in the unit of `/proc/<pid>/stat`'s start time (`sysconf(_SC_CLK_TCK)`
    /// ticks), or `nil` when the clock cannot be read.
    package static func bootTimeTicks() -> (ticks: UInt64, perSecond: UInt64)? {
        var now = timespec()
        let perSecond = sysconf(Int32(_SC_CLK_TCK))
        guard clock_gettime(CLOCK_BOOTTIME, &now) == 0, perSecond > 0, now.tv_sec >= 0 else { return nil }
        let ticks = UInt64(now.tv_sec) * UInt64(perSecond) + UInt64(now.tv_nsec) / (1_000_000_000 / UInt64(perSecond))
        return (ticks, UInt64(perSecond))
    }

    /// The daemon's own keys, decoded as `T` (keys `T` does not know are ignored).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONValueDecoder.decode(T.self, from: JSONValue(.object(daemonMembers)), rejectUnknownKeys: false)
    }

    /// The keys this library owns at the top level (of the file, and of `status --json`).
    package static let libraryKeys: Set<String> = [
        "formatVersion", "pid", "processStartTime", "state", "generation", "lastReload", "startedAt",
        "reloadSignal", "previousShutdownClean", "uptimeSeconds", daemonKey,
    ]

    /// The library's keys in version 1 files, beside which the daemon's stood: `reloadSignal`
    /// came with version 2, so in a version 1 file it is a key of the daemon's.
    private static let libraryKeysOfVersion1 = libraryKeys.subtracting(["reloadSignal"])

    /// The library's part of the file, in the order it is written.
    private struct Core: Decodable {
        var formatVersion: Int?
        var pid: Int32
        var processStartTime: UInt64?
        var state: String
        var generation: Int
        var lastReload: Reload?
        var startedAt: Int64
        var previousShutdownClean: Bool?
    }

    /// Parses a status file's bytes.
    ///
    /// - Throws: a parse or decoding error naming the key, or ``RuntimeStatusFormatError`` for
    ///   a newer format.
    package static func parse(_ bytes: [UInt8]) throws -> RuntimeStatus {
        let root = try JSONParser.parse(bytes)
        let core = try JSONValueDecoder.decode(Core.self, from: root, rejectUnknownKeys: false)
        let version = core.formatVersion ?? 1
        if version > formatVersion || version < 1 {
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
        guard case .object(let members) = root.kind else { return status }
        if version == 1 {
            // Version 1: the daemon's keys beside the library's.
            status.daemonMembers = members.filter {
                !libraryKeysOfVersion1.contains($0.key) || $0.key == daemonKey
            }
            return status
        }
        if let named = members.last(where: { $0.key == "reloadSignal" })?.value {
            // Anything but a string is kept as its JSON text: `status` still reads the file, and
            // `reload` refuses the value as no signal name.
            if case .string(let text) = named.kind {
                status.reloadSignal = text
            } else {
                status.reloadSignal = JSONWriter.write(named, pretty: false)
            }
        }
        if let own = members.last(where: { $0.key == daemonKey }) {
            guard case .object(let daemonMembers) = own.value.kind else {
                throw RuntimeStatusFormatError(found: version, problem: "its \"\(daemonKey)\" is not an object")
            }
            status.daemonMembers = daemonMembers
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
        if let reloadSignal { members.append(member("reloadSignal", JSONValue(.string(reloadSignal)))) }
        if let previousShutdownClean {
            members.append(member("previousShutdownClean", JSONValue(.bool(previousShutdownClean))))
        }
        members.append(member(Self.daemonKey, JSONValue(.object(daemonMembers))))
        return JSONValue(.object(members))
    }

    /// What `status --json` prints: the file's keys; then, as version 1 had them, the daemon's
    /// keys again at the top level unless the library owns the name (there they are only under
    /// `daemon`); then `uptimeSeconds`.
    package func json() throws -> String {
        var value = document()
        if case .object(var members) = value.kind {
            var seen = Set<String>()
            for member in daemonMembers where !Self.libraryKeys.contains(member.key) && seen.insert(member.key).inserted
            {
                members.append(member)
            }
            members.append(.init(key: "uptimeSeconds", value: JSONValue(.number("\(uptimeSeconds)"))))
            value.kind = .object(members)
        }
        return JSONWriter.write(value)
    }
}

/// A status file in a format this library does not read.
package struct RuntimeStatusFormatError: Error, CustomStringConvertible {
    /// The file's `formatVersion`.
    package var found: Int
    /// What is wrong in a file of a version this client reads; `nil` for a version it does not.
    package var problem: String?

    /// A file in a version this client does not read, or (with `problem`) a malformed one.
    package init(found: Int, problem: String? = nil) {
        self.found = found
        self.problem = problem
    }

    /// What happened and what to do.
    package var description: String {
        if let problem { return "the status file (format version \(found)) is malformed: \(problem)" }
        return
            "the status file has format version \(found), this client reads versions 1 to \(RuntimeStatus.formatVersion): use the daemon's own client"
    }
}
