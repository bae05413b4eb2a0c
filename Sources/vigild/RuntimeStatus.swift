import Synchronization
import Vigil
import VigildCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// vigild's runtime status, as `vigild status` and `vigild reload` read it from
/// `<runtime directory>/status.json`.
struct RuntimeStatus: Codable, Sendable, Equatable {
    struct Reload: Codable, Sendable, Equatable {
        /// `applied` or `rejected`.
        var result: String
        /// Why it was rejected; `null` when applied.
        var reason: String?
        /// `CLOCK_MONOTONIC` when the reload began, in µs: `vigild reload` waits for a reload
        /// that began after its signal.
        var beganMonotonicUsec: UInt64
    }

    struct Heartbeat: Codable, Sendable, Equatable {
        var interval: Double
        var message: String
    }

    var pid: Int32
    /// The daemon's start time in clock ticks after boot (field 22 of `/proc/<pid>/stat`):
    /// `vigild reload` signals `pid` only when the process there started at this time, so a
    /// reused pid or a forged file cannot make it signal another process. `nil` in files
    /// written by vigild before 0.1.1.
    var processStartTime: UInt64?
    /// `starting`, `running`, `reloading`, `stopping`, `stopped`.
    var state: String
    var generation: Int
    var lastReload: Reload?
    var heartbeats: Int
    var heartbeat: Heartbeat
    /// `CLOCK_REALTIME` at start, in seconds since the epoch.
    var startedAt: Int64
    var previousShutdownClean: Bool

    /// Seconds since start, as of now.
    var uptimeSeconds: Int64 { Int64(time(nil)) - startedAt }
}

extension RuntimeStatus {
    static let fileName = "status.json"
    /// The most a status file may hold: a heartbeat message is bounded well below this.
    static let sizeLimit = 256 << 10

    static func path(in directory: String) -> String { directory + "/" + fileName }

    /// Reads `status.json` from a verified directory (see ``TrustedDirectory``).
    static func read(from directory: TrustedDirectory) throws -> RuntimeStatus {
        let root = try JSONParser.parse(try directory.read(fileName, limit: sizeLimit))
        return try JSONValueDecoder.decode(RuntimeStatus.self, from: root, rejectUnknownKeys: false)
    }

    /// The JSON `vigild status --json` prints: the file plus `uptimeSeconds`.
    func json() throws -> String {
        var value = try JSONValueEncoder.encode(self)
        if case .object(var members) = value.kind {
            members.append(.init(key: "uptimeSeconds", value: JSONValue(.number("\(uptimeSeconds)"))))
            value.kind = .object(members)
        }
        return JSONWriter.write(value)
    }
}

/// Keeps `status.json` current: a lifecycle observer, told about heartbeats too. It writes
/// nothing until ``use(_:)`` hands it the verified runtime directory (a start-up step).
final class RuntimeStatusWriter: LifecycleObserver {
    private let directory = Mutex<TrustedDirectory?>(nil)
    private let status: Mutex<RuntimeStatus>
    private let heartbeat: HeartbeatWorker
    private let persistence: PersistenceListener<VigildConfiguration>
    /// Values the observer reads; set once the group exists.
    private let values: ValueStore

    init(
        heartbeat: HeartbeatWorker,
        persistence: PersistenceListener<VigildConfiguration>,
        values: ValueStore
    ) {
        self.heartbeat = heartbeat
        self.persistence = persistence
        self.values = values
        let defaults = VigildConfiguration.defaultConfiguration.heartbeat
        self.status = Mutex(
            RuntimeStatus(
                pid: getpid(),
                processStartTime: ProcessStartTime.current,
                state: "starting",
                generation: 1,
                lastReload: nil,
                heartbeats: 0,
                heartbeat: .init(interval: defaults.interval, message: defaults.message),
                startedAt: Int64(time(nil)),
                previousShutdownClean: true
            )
        )
    }

    func observe(_ record: LifecycleRecord) {
        update { status in
            switch record {
            case .started(let generation, _):
                status.state = "running"
                status.generation = generation
            case .reloadApplied(let generation, let duration):
                status.generation = generation
                status.lastReload = .init(result: "applied", reason: nil, beganMonotonicUsec: Self.began(duration))
            case .reloadRejected(let rejection, let generation, let duration):
                status.generation = generation
                status.lastReload = .init(
                    result: "rejected",
                    reason: rejection.description,
                    beganMonotonicUsec: Self.began(duration)
                )
            case .stopping: status.state = "stopping"
            case .stopped: status.state = "stopped"
            case .startFailed: status.state = "failed"
            case .userSignal, .listenerFailed, .fatalFault: break
            }
        }
    }

    /// Writes into `directory` from now on.
    func use(_ directory: TrustedDirectory) {
        self.directory.withLock { $0 = directory }
        update { _ in }
    }

    /// Records a heartbeat (called by the worker).
    func heartbeatCounted() { update { _ in } }

    private static func began(_ duration: Duration) -> UInt64 {
        MonotonicClock.microseconds() - duration.microseconds
    }

    private func update(_ change: (inout RuntimeStatus) -> Void) {
        // Written under the lock: the mediator and the heartbeat task both update the file.
        status.withLock { status in
            change(&status)
            status.heartbeats = heartbeat.count
            if let settings = values[CurrentConfiguration<VigildConfiguration>.self]?.heartbeat {
                status.heartbeat = .init(interval: settings.interval, message: settings.message)
            }
            status.previousShutdownClean = persistence.previousShutdownClean ?? true
            guard let text = try? JSONWriter.write(JSONValueEncoder.encode(status)) else { return }
            // Runtime status lives on tmpfs: atomic rename, no fsync.
            guard let directory = directory.withLock({ $0 }) else { return }
            try? directory.writeAtomically(Array(text.utf8), to: RuntimeStatus.fileName)
        }
    }
}
