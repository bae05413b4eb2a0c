import Synchronization
import VigilLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What reports whether the previous run stopped cleanly: ``PersistenceListener``.
protocol ShutdownHistory: Sendable {
    var previousShutdownClean: Bool? { get }
}

extension PersistenceListener: ShutdownHistory {}

/// Keeps `status.json` current: a lifecycle observer that ``DaemonCommandLine`` adds to every
/// daemon it runs. It writes nothing until the runtime directory is verified (a start-up step).
///
/// A daemon adds keys of its own with ``addKeys(_:)`` and calls ``update()`` when they change
/// between lifecycle events:
///
/// ```swift
/// options.status.addKeys { MyStatus(requests: counter.value) }
/// ```
public final class RuntimeStatusWriter: LifecycleObserver {
    private struct State {
        var status: RuntimeStatus
        var directory: TrustedDirectory?
        var keys: [@Sendable () throws -> JSONValue] = []
        var history: (any ShutdownHistory)?
    }

    private let state: Mutex<State>

    /// A writer for this process, in state `starting`.
    public init() {
        state = Mutex(
            State(
                status: RuntimeStatus(
                    pid: getpid(),
                    processStartTime: ProcessStartTime.current,
                    state: "starting",
                    generation: 1,
                    lastReload: nil,
                    startedAt: Int64(time(nil)),
                    previousShutdownClean: true
                )
            )
        )
    }

    /// Adds the daemon's own keys: `keys()` is encoded as a JSON object at every write, and its
    /// members follow the library's (a key the library owns is left out). Keep it quick: it
    /// runs on the mediator's task.
    public func addKeys<Keys: Encodable & Sendable>(_ keys: @escaping @Sendable () -> Keys) {
        state.withLock { $0.keys.append { try JSONValueEncoder.encode(keys()) } }
    }

    /// Rewrites the file now (after the daemon's own keys changed).
    public func update() { write { _ in } }

    /// The status as last written (or as it would be).
    public var current: RuntimeStatus { state.withLock { $0.status } }

    /// Records a lifecycle event in the status and rewrites the file.
    public func observe(_ record: LifecycleRecord) {
        write { status in
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

    /// Takes `previousShutdownClean` from the first listener that knows it.
    func track(_ listeners: [any Listener]) {
        guard let history = listeners.lazy.compactMap({ $0 as? any ShutdownHistory }).first else { return }
        state.withLock { $0.history = history }
    }

    /// Writes into `directory` from now on.
    package func use(_ directory: TrustedDirectory) {
        state.withLock { $0.directory = directory }
        update()
    }

    private static func began(_ duration: Duration) -> UInt64 {
        let now = MonotonicClock.microseconds()
        let elapsed = duration.microseconds
        return now > elapsed ? now - elapsed : 0
    }

    private func write(_ change: (inout RuntimeStatus) -> Void) {
        // Under the lock: the mediator and the daemon's own tasks both update the file.
        state.withLock { state in
            change(&state.status)
            if let clean = state.history?.previousShutdownClean { state.status.previousShutdownClean = clean }
            var members: [JSONValue.Member] = []
            for keys in state.keys {
                guard case .object(let added)? = try? keys().kind else { continue }
                members += added.filter { !RuntimeStatus.libraryKeys.contains($0.key) }
            }
            state.status.daemonMembers = members
            guard let directory = state.directory, let document = try? state.status.document() else { return }
            // Runtime status lives on tmpfs: atomic rename, no fsync.
            try? directory.writeAtomically(Array(JSONWriter.write(document).utf8), to: RuntimeStatus.fileName)
        }
    }
}
