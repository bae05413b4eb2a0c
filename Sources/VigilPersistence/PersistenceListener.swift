import Logging
import Synchronization
import VigilConfiguration
import VigilLifecycle
import VigilPOSIX
import VigilPlatform
import VigilSystemd

/// The standard persistence listener: opens the ``StateStore`` at start, checkpoints it on
/// `SIGUSR1`, at stop, and periodically when something changed; detects an unclean previous
/// shutdown.
///
/// Unclean-shutdown detection: a ``ShutdownMarker`` (`<state file>.running`) is written at start
/// and removed after the final checkpoint of a clean stop; finding it at start means the
/// previous run crashed, was killed with `SIGKILL`, or lost power. That is logged at warning
/// level with the unclean-shutdown `MESSAGE_ID`, and ``previousShutdownClean`` is `false`.
public final class PersistenceListener<Configuration: ValidatedConfiguration>: Listener, ShutdownHistory {
    /// `persistence`: listeners that keep state depend on it.
    public let name = "persistence"
    public let dependencies: [String]
    /// The state file.
    public let path: String
    private let interval: @Sendable (Configuration) -> Duration
    private let state = Mutex<StateStore?>(nil)
    private let marker: ShutdownMarker
    /// Periodic checkpoints: keep their phase across reloads that do not change the interval.
    private let checkpoints = PeriodicTask()

    /// Creates the listener.
    ///
    /// - Parameters:
    ///   - path: the state file, e.g. `$STATE_DIRECTORY/state.json`.
    ///   - configurationListener: the name of the listener providing `Configuration`.
    ///   - checkpointInterval: how often to checkpoint from the configuration; zero means only
    ///     on `SIGUSR1` and at stop.
    public init(
        path: String,
        configurationListener: String = "configuration",
        checkpointInterval: @escaping @Sendable (Configuration) -> Duration
    ) {
        self.path = path
        self.dependencies = [configurationListener]
        self.interval = checkpointInterval
        self.marker = ShutdownMarker(path: path + ".running")
    }

    /// `false` when the previous run did not stop cleanly; `nil` before start.
    public var previousShutdownClean: Bool? { marker.previousShutdownClean }

    /// The store, once started.
    public var store: StateStore? { state.withLock { $0 } }

    public func start(context: ListenerContext) async throws {
        let directory = FileSystem.parent(of: path)
        try FileSystem.makeDirectories(directory)
        try StateStore.checkOwnership(of: directory)
        let store = try StateStore(path: path)
        if let aside = store.restored.movedAside, let problem = store.restored.problem {
            context.logger.warning(
                "The state file \(path) could not be read (\(problem)); moved it to \(aside) and starting from empty state",
                metadata: ["VIGIL_STATE_FILE": "\(path)", "VIGIL_MOVED_TO": "\(aside)"]
            )
        }
        let previous = try marker.begin()
        if !previous.clean {
            context.logger.warning(
                "The previous run (pid \(previous.pid ?? "?")) did not shut down cleanly; state is as of its last checkpoint",
                metadata: [
                    "MESSAGE_ID": .string(LifecycleMessageID.uncleanShutdown.rawValue),
                    "VIGIL_EVENT": "unclean-shutdown",
                ]
            )
        }
        context.values[StateStoreKey.self] = store
        state.withLock { $0 = store }
        let configuration = try context.values.require(CurrentConfiguration<Configuration>.self)
        let logger = context.logger
        checkpoints.schedule(every: interval(configuration)) {
            do {
                try store.checkpoint()
            } catch {
                logger.error("Periodic checkpoint to \(store.path) failed: \(error)")
            }
        }
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        // An unchanged interval keeps the schedule's phase: frequent reloads never starve it.
        checkpoints.schedule(every: interval(try reload.proposed.require(CurrentConfiguration<Configuration>.self)))
    }

    public func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        guard signal == .sigusr1, let store = self.store else { return }
        try store.checkpoint(force: true)
        context.logger.info("Checkpoint written to \(path)", metadata: ["VIGIL_EVENT": "checkpoint"])
    }

    public func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        await checkpoints.stop()
        guard let store else { return }
        do {
            try store.checkpoint(force: true)
        } catch {
            // The marker stays: the next start reports this run as unclean, which it was.
            throw FinalCheckpointError(path: path, cause: error, lost: store.unsavedSummary)
        }
        try marker.end()
    }
}

/// The checkpoint at stop failed: what changed since the last successful checkpoint is lost.
public struct FinalCheckpointError: Error, CustomStringConvertible, ErrnoRepresentable {
    /// The state file.
    public let path: String
    /// Why the write failed.
    public let cause: any Error
    /// What is lost, e.g. "changes to heartbeat since the checkpoint of 12 s ago".
    public let lost: String

    public var errno: Int32 { (cause as? any ErrnoRepresentable)?.errno ?? EIO }

    public var description: String {
        "the final checkpoint to \(path) failed (\(cause)); lost: \(lost). "
            + "The file still holds the previous checkpoint; free space or fix the directory before the next start."
    }
}
