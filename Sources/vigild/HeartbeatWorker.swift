import Logging
import Synchronization
import Vigil
import VigildCore

/// The reference daemon's worker: every `heartbeat.interval` seconds it logs
/// `heartbeat.message` with the field `VIGIL_HEARTBEAT=<count>` and counts. The count lives in
/// the state store under `heartbeat`, so it continues across restarts. An interval of 0 turns
/// the heartbeat off: no task, no timer, no wake-ups.
final class HeartbeatWorker: Listener {
    struct Settings: Sendable, Hashable {
        var interval: Duration
        var message: String

        init(_ configuration: VigildConfiguration) {
            interval = .seconds(fractional: configuration.heartbeat.interval)
            message = configuration.heartbeat.message
        }
    }

    /// What the worker keeps in the state store.
    struct State: Codable, Sendable {
        /// The largest count: 2^53 − 1, the largest integer every JSON reader keeps exactly.
        static let maximumCount = (1 << 53) - 1

        var count: Int

        /// The state-file check at restore: a count from 0 to ``maximumCount``.
        static func validate(_ state: State) throws(InvalidValue) {
            guard (0...maximumCount).contains(state.count) else {
                throw InvalidValue(
                    ["count"],
                    "expected a whole number from 0 to \(maximumCount), found \(state.count)"
                )
            }
        }

        /// The count after one more beat; it stops at ``maximumCount`` instead of overflowing.
        static func counted(after count: Int) -> Int {
            count < maximumCount ? count + 1 : maximumCount
        }
    }

    let name = "heartbeat"
    let dependencies = ["configuration", "persistence"]
    private let state = Mutex<(settings: Settings?, count: Int)>((nil, 0))
    /// The beat's schedule: keeps its phase across reloads that do not change the interval.
    private let ticker = PeriodicTask()

    private let beatObserver = Mutex<@Sendable () -> Void>({})

    /// Calls `observer` after each heartbeat (the runtime status writer).
    func onBeat(_ observer: @escaping @Sendable () -> Void) {
        beatObserver.withLock { $0 = observer }
    }

    /// The heartbeats counted so far (restored ones included).
    var count: Int { state.withLock { $0.count } }

    /// Whether the worker has started: its count restored and its settings known.
    var hasStarted: Bool { state.withLock { $0.settings != nil } }

    /// The settings in force.
    var settings: Settings? { state.withLock { $0.settings } }

    func start(context: ListenerContext) async throws {
        let store = try context.values.require(StateStoreKey.self)
        let restored: Int
        do {
            restored = try store.value(State.self, forKey: name, validate: State.validate)?.count ?? 0
        } catch {
            context.logger.warning(
                "The heartbeat count in the state file cannot be used (\(error)); counting from 0",
                metadata: ["VIGIL_STATE_FILE": "\(error.path)", "VIGIL_MOVED_TO": "\(error.movedAside ?? "")"]
            )
            restored = 0
        }
        let settings = Settings(try context.values.require(CurrentConfiguration<VigildConfiguration>.self))
        state.withLock {
            $0.count = restored
            $0.settings = settings
        }
        ticker.schedule(every: settings.interval) { [self] in beat(store: store, logger: context.logger) }
    }

    func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        let settings = Settings(try reload.proposed.require(CurrentConfiguration<VigildConfiguration>.self))
        // The next beat logs the new message; only a new interval moves the schedule.
        state.withLock { $0.settings = settings }
        ticker.schedule(every: settings.interval)
    }

    func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        guard signal == .sigusr1 else { return }
        let count = self.count
        let interval = settings.map { "\($0.interval)" } ?? "?"
        context.logger.notice(
            "Status report: generation \(context.generation), \(count) heartbeats, every \(interval)",
            metadata: [
                "VIGIL_HEARTBEAT": "\(count)", "VIGIL_GENERATION": "\(context.generation)",
                "VIGIL_EVENT": "status-report",
            ]
        )
        context.reportStatus("\(count) heartbeats")
    }

    func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        await ticker.stop()
    }

    private func beat(store: StateStore, logger: Logger) {
        let (count, message) = state.withLock { state -> (Int, String) in
            state.count = State.counted(after: state.count)
            return (state.count, state.settings?.message ?? "")
        }
        do {
            try store.set(State(count: count), forKey: name)
        } catch {
            logger.error("Could not record heartbeat \(count) in the state store: \(error)")
        }
        logger.info("\(message)", metadata: ["VIGIL_HEARTBEAT": "\(count)"])
        beatObserver.withLock { $0 }()
    }
}
