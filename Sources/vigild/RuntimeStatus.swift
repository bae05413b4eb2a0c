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
    static func path(in directory: String) -> String { directory + "/status.json" }

    static func read(from directory: String) throws -> RuntimeStatus {
        let path = path(in: directory)
        let root = try JSONParser.parse(try FileSystem.read(path))
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

/// Keeps `status.json` current: a lifecycle observer, told about heartbeats too.
final class RuntimeStatusWriter: LifecycleObserver {
    private let path: String
    private let status: Mutex<RuntimeStatus>
    private let heartbeat: HeartbeatWorker
    private let persistence: PersistenceListener<VigildConfiguration>
    /// Values the observer reads; set once the group exists.
    private let values: ValueStore

    init(
        directory: String,
        heartbeat: HeartbeatWorker,
        persistence: PersistenceListener<VigildConfiguration>,
        values: ValueStore
    ) {
        self.path = RuntimeStatus.path(in: directory)
        self.heartbeat = heartbeat
        self.persistence = persistence
        self.values = values
        let defaults = VigildConfiguration.defaultConfiguration.heartbeat
        self.status = Mutex(
            RuntimeStatus(
                pid: getpid(),
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
            try? FileSystem.writeAtomically(Array(text.utf8), to: path, durable: false)
        }
    }
}
