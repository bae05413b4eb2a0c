import Logging
import Synchronization
import VigilConfiguration
import VigilEventLoop
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
///
/// All of its file work runs on a helper thread with a deadline (`fileTimeout`): a state
/// directory on a hung file system fails the start with the path and "did not answer in 5 s",
/// and a checkpoint that does not finish in time fails its hook with the path, instead of
/// wedging the daemon's thread.
public final class PersistenceListener<Configuration: ValidatedConfiguration>: Listener, ShutdownHistory {
    /// `persistence`: listeners that keep state depend on it.
    public let name = "persistence"
    public let dependencies: [String]
    /// The state file.
    package let path: String
    private let interval: @Sendable (Configuration) -> Duration
    private let state = Mutex<StateStore?>(nil)
    private let marker: ShutdownMarker
    /// Periodic checkpoints: keep their phase across reloads that do not change the interval.
    private let checkpoints = PeriodicTask()
    /// How long the file system may take for the start's file work (create the directory,
    /// read the state file, write the marker) before the start fails, and for a checkpoint on
    /// `SIGUSR1` or a periodic one: 5 s by default, and never more than the hook's budget less a
    /// tenth of it (at most 1 s). The final checkpoint at stop may take its whole budget so.
    package let fileTimeout: Duration

    /// Creates the listener.
    ///
    /// - Parameters:
    ///   - path: the state file, e.g. `$STATE_DIRECTORY/state.json`.
    ///   - configurationListener: the name of the listener providing `Configuration`.
    ///   - checkpointInterval: how often to checkpoint from the configuration; zero means only
    ///     on `SIGUSR1` and at stop.
    ///   - fileTimeout: how long the start's file work and a checkpoint may take; see `fileTimeout`.
    public init(
        path: String,
        configurationListener: String = "configuration",
        fileTimeout: Duration = .seconds(5),
        checkpointInterval: @escaping @Sendable (Configuration) -> Duration
    ) {
        self.path = path
        self.fileTimeout = fileTimeout
        self.dependencies = [configurationListener]
        self.interval = checkpointInterval
        self.marker = ShutdownMarker(path: path + ".running")
    }

    /// `false` when the previous run did not stop cleanly; `nil` before start.
    public var previousShutdownClean: Bool? { marker.previousShutdownClean }

    /// The store, once started.
    package var store: StateStore? { state.withLock { $0 } }

    /// What the start found on disk.
    private struct Opened: Sendable {
        var store: StateStore
        /// How the previous run ended, as the marker told.
        var previous: ShutdownMarker.Previous
    }

    /// The state file's size once the open read it; -1 before.
    private final class ReadSize: Sendable {
        let bytes = Atomic<Int>(-1)
    }

    /// The start's file work, on the helper thread: everything that touches the state directory.
    private static func open(path: String, marker: ShutdownMarker, read: ReadSize) -> Result<Opened, any Error> {
        Result {
            let directory = FileSystem.parent(of: path)
            // The path rule before anything is made, and for each directory made on the way (as
            // `run` does): a daemon not built on DaemonCommandLine, or a state file below the
            // state directory, would otherwise make directories behind another user's link.
            try DirectoryPathRule.create(directory, role: .state)
            try StateStore.checkOwnership(of: directory)
            let existed = !FileSystem.isAbsent(path)
            let store = try StateStore(path: path, read: { read.bytes.store($0, ordering: .releasing) })
            let previous = try marker.beginReading(dataExisted: existed)
            return Opened(store: store, previous: previous)
        }
    }

    /// What a hook with `budget` may give the file system: the budget less a tenth of it, at
    /// most 1 s (the hook still has to say what happened in time).
    private static func deadline(within budget: Duration) -> Duration {
        budget - min(budget / 10, .seconds(1))
    }

    /// Writes a checkpoint on the helper thread and waits at most `deadline` for it: a state
    /// directory on a slow or hung file system (an `fsync` behind gigabytes of someone else's
    /// dirty pages, a hard NFS mount) delays this hook, never the daemon's thread, which goes on
    /// answering signals and the watchdog. A write that misses its deadline goes on in the
    /// background; the file holds the previous checkpoint or this one, never a mix.
    private static func checkpoint(
        _ store: StateStore,
        force: Bool,
        deadline: Duration,
        waitInPlace: Duration = BlockingWorker.defaultWaitInPlace,
        last: Bool = false,
        cancellable: Bool = true,
        then: (@Sendable () throws -> Void)? = nil
    ) async throws {
        let outcome = await BlockingWorker.shared.run(
            deadline: deadline,
            waitInPlace: waitInPlace,
            last: last,
            cancellable: cancellable
        ) {
            Result { () throws in
                try store.checkpoint(force: force)
                try then?()
            }
        }
        switch outcome {
        case .finished(let result): _ = try result.get()
        case .timedOut:
            // The file system is to blame only once the write has reached it.
            if store.checkpointStage == .makingText {
                throw CheckpointTextTooSlow(path: store.path, deadline: deadline)
            }
            throw SystemError(
                path: store.path,
                operation: "write a checkpoint",
                errno: ETIMEDOUT,
                detail: "the file system did not finish in \(deadline.formatted) (a hung or overloaded mount?); "
                    + "the write goes on in the background and the file keeps the previous checkpoint until it ends"
            )
        case .cancelled:
            throw SystemError(path: store.path, operation: "write a checkpoint", errno: ECANCELED)
        case .unavailable(let why):
            throw SystemError(path: store.path, operation: "write a checkpoint", errno: EAGAIN, detail: why)
        }
    }

    public func start(context: ListenerContext) async throws {
        let deadline = min(fileTimeout, Self.deadline(within: context.budgets(for: name).start))
        let (path, marker) = (path, marker)
        // The file's size once it was read (-1 before): a deadline missed after that is the
        // parse's, not the file system's.
        let read = ReadSize()
        let opened: Opened
        // Not cancellable: a stop requested during start-up waits for the open (within its
        // deadline), so that what it began (the unclean-shutdown marker) is ended by terminate.
        // Abandoned on cancellation, the open went on, wrote the marker after a clean stop, and
        // the next start reported that stop unclean (a reviewer's find).
        switch await BlockingWorker.shared.run(
            deadline: deadline,
            cancellable: false,
            { Self.open(path: path, marker: marker, read: read) }
        ) {
        case .finished(let result): opened = try result.get()
        case .timedOut:
            let size = read.bytes.load(ordering: .acquiring)
            throw SystemError(
                path: path,
                operation: "open the state file",
                errno: ETIMEDOUT,
                detail: size < 0
                    ? "the file system did not answer in \(deadline.formatted) (a hung mount?)"
                    : "its \(FileSystem.describeSize(size)) were read, but parsing them took more than "
                        + "\(deadline.formatted) (a very large state, or a machine short of CPU: store less in it; "
                        + "a daemon can give PersistenceListener a longer fileTimeout)"
            )
        case .cancelled:
            throw SystemError(path: path, operation: "open the state file", errno: ECANCELED)
        case .unavailable(let why):
            throw SystemError(path: path, operation: "open the state file", errno: EAGAIN, detail: why)
        }
        let store = opened.store
        if let aside = store.restored.movedAside, let problem = store.restored.problem {
            context.logger.warning(
                "The state file \(path) could not be read (\(problem)); moved it to \(aside) and starting from empty state",
                metadata: ["VIGIL_STATE_FILE": "\(path)", "VIGIL_MOVED_TO": "\(aside)"]
            )
        }
        let previous = opened.previous
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
        let writeTimeout = min(fileTimeout, Self.deadline(within: context.budgets(for: name).userSignal))
        // Said once per run of failures, and again when a checkpoint succeeds: a full disk
        // wrote the same error at every interval. The error names the file.
        let failing = Mutex(false)
        checkpoints.schedule(every: interval(configuration)) {
            do {
                try await Self.checkpoint(store, force: false, deadline: writeTimeout)
                if failing.withLock({ was -> Bool in
                    defer { was = false }; return was
                }) {
                    logger.notice("Periodic checkpoints of \(store.path) are written again")
                }
            } catch {
                guard
                    !failing.withLock({ was -> Bool in
                        defer { was = true }; return was
                    })
                else { return }
                logger.error(
                    "Periodic checkpoint failed: \(error). The next ones are tried at every interval; this is said again once one is written"
                )
            }
        }
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        // An unchanged interval keeps the schedule's phase: frequent reloads never starve it.
        checkpoints.schedule(every: interval(try reload.proposed.require(CurrentConfiguration<Configuration>.self)))
    }

    public func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        guard signal == .sigusr1, let store = self.store else { return }
        try await Self.checkpoint(
            store,
            force: true,
            deadline: min(fileTimeout, Self.deadline(within: context.budgets(for: name).userSignal))
        )
        context.logger.info("Checkpoint written to \(path)", metadata: ["VIGIL_EVENT": "checkpoint"])
    }

    public func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        await checkpoints.stop()
        guard let store else { return }
        let marker = self.marker
        // A hook abandoned at this stop (it ignored cancellation) still runs: what it sets after
        // this checkpoint is lost, so the stop is not clean for the state, and the marker stays.
        let stillRunning = context.abandonedHooksRunning
        if stillRunning > 0 {
            context.logger.warning(
                "\(stillRunning) abandoned listener hook(s) still run at the final checkpoint; the unclean-shutdown marker stays, so the next start reports this stop as unclean (what they change from now on is lost)"
            )
        }
        // The marker goes in the same call on the helper thread, after the checkpoint: its
        // directory's fsync must not stall the daemon's thread either. It goes only while this
        // stop can still be reported clean: not once the wait below gave up (the write missed its
        // deadline and ends in the background), nor once a second stop request cut this hook
        // short and the mediator went on without it (it counts among the abandoned hooks then).
        // Either way the stop is reported failed, and the next start must say it was unclean.
        let gaveUp = Atomic<Bool>(false)
        do {
            try await Self.checkpoint(
                store,
                force: true,
                deadline: Self.deadline(within: context.budgets(for: name).terminate),
                // The daemon's thread has nothing else to do but wait: up to 2 ms in place spares
                // it a suspension and a wake-up on another CPU (on tmpfs the checkpoint takes
                // ~0.1 ms); past that it suspends, so the budget and a second stop request work.
                waitInPlace: .milliseconds(2),
                // The daemon's file work ends here: the helper thread ends with it, while awake.
                last: true,
                // A second stop request cancels this hook; the checkpoint's few milliseconds go
                // on (within the deadline, and the mediator's second of grace), so a stop that
                // wrote everything says so: it read "cut short" with the file written.
                cancellable: false
            ) { [marker] in
                guard stillRunning == 0, context.abandonedHooksRunning == 0, !gaveUp.load(ordering: .acquiring)
                else { return }
                do { try marker.end() } catch { throw MarkerNotRemoved(cause: error) }
            }
        } catch let error as MarkerNotRemoved {
            throw error.cause
        } catch {
            // The marker stays: the next start reports this run as unclean, which it was.
            gaveUp.store(true, ordering: .releasing)
            // Not from the file system (an lstat here): it may be the one that stopped answering,
            // and this is the daemon's own thread.
            throw FinalCheckpointError(
                path: path,
                cause: error,
                lost: store.unsavedSummary,
                previousKept: store.fileHoldsAState
            )
        }
    }
}

/// The checkpoint at stop was written, but the unclean-shutdown marker could not be removed.
private struct MarkerNotRemoved: Error {
    let cause: any Error
}

/// The checkpoint at stop failed: what changed since the last successful checkpoint is lost.
package struct FinalCheckpointError: Error, CustomStringConvertible, ErrnoRepresentable {
    /// The state file.
    package let path: String
    /// Why the write failed.
    package let cause: any Error
    /// What is lost, e.g. "changes to heartbeat since the checkpoint of 12 s ago".
    package let lost: String
    /// Whether a file from an earlier checkpoint is there to keep what it held.
    package let previousKept: Bool

    package init(path: String, cause: any Error, lost: String, previousKept: Bool = true) {
        self.path = path
        self.cause = cause
        self.lost = lost
        self.previousKept = previousKept
    }

    /// A state too large for the file: no file system is to blame, and none can help.
    private var tooLarge: Bool { (cause as? StateStoreError)?.code == .tooLarge }

    package var errno: Int32 { tooLarge ? EFBIG : (cause as? any ErrnoRepresentable)?.errno ?? EIO }

    package var description: String {
        let kept = previousKept ? "The file still holds the previous checkpoint" : "No earlier checkpoint was on disk"
        guard !tooLarge, !(cause is CheckpointTextTooSlow) else {
            return "the final checkpoint to \(path) failed (\(cause)); lost: \(lost). \(kept)."
        }
        let advice =
            switch errno {
            case ENOSPC, EDQUOT: "free space on its file system"
            case EMFILE, ENFILE: "raise LimitNOFILE= (the daemon had no descriptor left to write it)"
            case EACCES, EPERM, EROFS: "make the directory writable by the daemon"
            default: "fix the directory or its file system"
            }
        return
            "the final checkpoint to \(path) failed (\(cause)); lost: \(lost). \(kept); \(advice) before the next start."
    }
}

/// A checkpoint that missed its deadline before its write began: making the text of the state
/// took that long (a very large state, or a machine short of CPU), and no file system is to blame.
package struct CheckpointTextTooSlow: Error, CustomStringConvertible, ErrnoRepresentable {
    /// The state file.
    package let path: String
    /// How long the checkpoint had.
    package let deadline: Duration

    package init(path: String, deadline: Duration) {
        self.path = path
        self.deadline = deadline
    }

    package var errno: Int32 { ETIMEDOUT }

    package var description: String {
        DisplayText.escapingControlCharacters(
            "cannot write a checkpoint to \(path): making the text of the state took more than \(deadline.formatted), "
                + "before anything was written (a very large state, or a machine short of CPU; store less in it); "
                + "it goes on in the background and the file keeps the previous checkpoint until it ends"
        )
    }
}
