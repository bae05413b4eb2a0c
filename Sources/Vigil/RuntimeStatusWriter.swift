import Logging
import Synchronization
import VigilLifecycle
import VigilPlatform
import VigilSystemd

/// Keeps `status.json` current: ``DaemonCommandLine`` has every daemon it runs report its
/// lifecycle records here. It writes nothing until the runtime directory is verified (a start-up step).
///
/// A daemon adds keys of its own with ``addKeys(_:)`` (written under `daemon`, apart from the
/// library's) and calls ``update()`` when they change between lifecycle events:
///
/// ```swift
/// options.status.addKeys { MyStatus(requests: counter.value) }
/// ```
public final class RuntimeStatusWriter: Sendable {
    private struct State {
        var status: RuntimeStatus
        var directory: TrustedDirectory?
        var keys: [@Sendable () throws -> JSONValue] = []
        var history: (any ShutdownHistory)?
        /// The write that `deferral` after an event will make, if one is due.
        var pending: Task<Void, Never>?
        /// Where a failed write is reported (the daemon's logger), and whether the last failed.
        var logger: Logger?
        var failing = false
        /// Why the daemon's keys were last left out of the file, if they were: said once, and
        /// again when they are back.
        var keysLeftOut: String?
    }

    private let state: Mutex<State>

    /// How long the write after a reload's `READY=1` waits: the reloads of a burst (back to
    /// back) share one write, and the mediator is free for the next signal at once. `reload`
    /// polls the file every 5 ms. A change of state (started, stopped, failed) is written at
    /// once; "stopping" waits as a reload's outcome does, unless `stoppingWaits` says no.
    package let deferral: Duration

    /// Whether "stopping" may wait for the deferral: not while the exit holds the descriptor of a
    /// barrier sent ahead (see `observe(_:)`).
    private let stoppingWaits: @Sendable () -> Bool

    /// A writer that keeps the status in memory and writes no file: for a test of a listener
    /// that adds keys, which reads them back with ``daemonKeys(as:)``. A daemon's own writer is
    /// `DaemonOptions.status`, which writes `status.json` once the runtime directory is verified.
    public convenience init() {
        self.init(deferral: .milliseconds(1))
    }

    package init(
        deferral: Duration,
        stoppingWaits: @escaping @Sendable () -> Bool = { !SystemdNotifier.holdsBarrierAhead }
    ) {
        self.deferral = deferral
        self.stoppingWaits = stoppingWaits
        state = Mutex(
            State(
                status: RuntimeStatus(
                    pid: getpid(),
                    processStartTime: ProcessStartTime.current,
                    state: "starting",
                    generation: 1,
                    lastReload: nil,
                    startedAt: Int64(time(nil)),
                    previousShutdownClean: nil
                )
            )
        )
    }

    /// Adds the daemon's own keys: `keys()` is encoded as a JSON object at every write, and its
    /// members go in the file's `daemon` object, where no key of the library's can be (`nil`, or
    /// anything that is not an object, adds nothing this time). Keep it quick: it runs on the
    /// mediator's task. When `keys()` holds a value JSON cannot (a NaN), everything this call
    /// added is left out of that write; all of the daemon's keys are while they would make the
    /// file longer than the 256 KiB `status` and `reload` read. The daemon's log says so once, and
    /// again when they are back.
    public func addKeys<Keys: Encodable & Sendable>(_ keys: @escaping @Sendable () -> Keys) {
        state.withLock { $0.keys.append { try JSONValueEncoder.encode(keys()) } }
    }

    /// Rewrites the file now (after the daemon's own keys changed).
    public func update() { write() }

    /// The daemon's keys as the next write puts them under `daemon`, decoded as `T` (keys `T`
    /// does not know are ignored): what `statusLines:` reads with `status.decode(T.self)`.
    /// Throws where the file would leave keys out — one `addKeys` closure's keys cannot be
    /// written as JSON, or all of them would make the file longer than the 256 KiB `status` and
    /// `reload` read — and when the keys do not decode as `T`.
    public func daemonKeys<T: Decodable>(as type: T.Type) throws -> T {
        let keys = state.withLock { $0.keys }
        var status = current
        let (members, failure) = Self.members(of: keys)
        if let failure { throw failure }
        status.daemonMembers = members
        guard JSONWriter.bytes(status.document(), pretty: true, limit: RuntimeStatus.sizeLimit) != nil else {
            throw KeysTooLong()
        }
        return try status.decode(T.self)
    }

    /// The daemon's keys would make the status file too long: the file leaves them all out.
    private struct KeysTooLong: Error, CustomStringConvertible {
        var description: String {
            "the daemon's status keys make the file longer than the \(RuntimeStatus.sizeLimit / 1024) KiB that "
                + "'status' and 'reload' read, so the file leaves them all out; keep fewer or shorter keys"
        }
    }

    /// The members of the daemon's `addKeys` closures, merged (the first closure's key wins), and
    /// the error of the last closure whose keys JSON cannot hold, if any.
    private static func members(
        of keys: [@Sendable () throws -> JSONValue]
    ) -> (members: [JSONValue.Member], failure: (any Error)?) {
        var members: [JSONValue.Member] = []
        var seen: Set<String>?
        var failure: (any Error)?
        for keys in keys {
            let value: JSONValue
            do {
                value = try keys()
            } catch {
                // A value JSON cannot hold (a NaN, say): the others are still written.
                failure = error
                continue
            }
            guard case .object(let added) = value.kind else { continue }
            // One object holds each key once: the first closure's keys need no check (most
            // daemons have one closure), and the set of keys seen is made for a second.
            guard !members.isEmpty || seen != nil else {
                members = added
                continue
            }
            if seen == nil { seen = Set(members.lazy.map(\.key)) }
            // Two closures with one key: the first one's.
            members += added.filter { seen!.insert($0.key).inserted }
        }
        return (members, failure)
    }

    /// The status as last written (or as it would be).
    package var current: RuntimeStatus { state.withLock { $0.status } }

    /// The most of a rejection's reason the file keeps: `reload` and `status` read at most
    /// 256 KiB of it, and a listener's reason (or a file's megabyte-long key) must not make the
    /// file unreadable to them until the next good reload.
    static let maximumReasonBytes = 4096

    /// `reason`, cut on a character boundary to ``maximumReasonBytes`` with how long it was.
    static func shortened(_ reason: String) -> String {
        guard reason.utf8.count > maximumReasonBytes else { return reason }
        var kept = Substring("")
        var bytes = 0
        for character in reason {
            bytes += character.utf8.count
            if bytes > maximumReasonBytes { break }
            kept.append(character)
        }
        return kept + "… (\(reason.utf8.count) bytes)"
    }

    /// Records a lifecycle event in the status and rewrites the file: `deferral` later after
    /// a reload (or an event that changes none of the library's keys), else at once.
    package func observe(_ record: LifecycleRecord) {
        let now = state.withLock { state -> Bool in
            switch record.kind {
            case .started(let generation, _):
                state.status.state = "running"
                state.status.generation = generation
            case .reloadApplied(let generation, let duration):
                state.status.generation = generation
                state.status.lastReload = .init(
                    result: "applied",
                    reason: nil,
                    beganMonotonicUsec: Self.began(duration)
                )
            case .reloadRejected(let rejection, let generation, let duration):
                state.status.generation = generation
                state.status.lastReload = .init(
                    result: "rejected",
                    reason: Self.shortened(rejection.description),
                    beganMonotonicUsec: Self.began(duration)
                )
            case .stopping: state.status.state = "stopping"
            case .stopped: state.status.state = "stopped"
            case .startFailed: state.status.state = "failed"
            case .userSignal, .listenerFailed, .fatalFault, .memoryPressure: return false
            }
            // A reload's outcome can wait; a change of state (`systemctl start` returns on
            // READY=1, and `status` should then say "running") cannot, but for "stopping": most
            // stops end within the deferral, and "stopped" then takes its place (one file write
            // fewer on the way to the exit: 110-140 µs of a 0.9 ms stop here); a longer stop
            // shows "stopping" `deferral` after it began. Deferred, it may be written while the
            // final checkpoint's file is open on the helper thread: two files at once, which the
            // smallest LimitNOFILE= allows only while the exit holds no barrier's descriptor
            // (with one held it failed with EMFILE, found with a busy loop on the test's CPU).
            // So with a barrier sent ahead, "stopping" is written at once, as before.
            switch record.kind {
            case .reloadApplied, .reloadRejected: return false
            case .stopping: return !stoppingWaits()
            default: return true
            }
        }
        if now { write() } else { scheduleWrite() }
    }

    /// Records the event of `kind` (the tests feed the writer so).
    package func observe(_ kind: LifecycleRecord.Kind) { observe(LifecycleRecord(kind)) }

    /// The writer as the daemon's observer of lifecycle records (`DaemonCommandLine` adds it).
    package var observer: any LifecycleObserver { Observer(writer: self) }

    private struct Observer: LifecycleObserver {
        let writer: RuntimeStatusWriter
        func observe(_ record: LifecycleRecord) { writer.observe(record) }
    }

    /// The write scheduled after the last event, if it is still due (tests await it).
    package var pendingWrite: Task<Void, Never>? { state.withLock { $0.pending } }

    /// Records the signal the daemon reloads on, for `reload` to send (`DaemonCommandLine` calls
    /// this before the first write).
    package func recordReloadSignal(_ signal: ProcessSignal) {
        state.withLock { $0.status.reloadSignal = signal.description }
    }

    /// Takes `previousShutdownClean` from the first listener that keeps a `ShutdownHistory`
    /// (conforms, or is a `ServiceListener` handed one); with none it stays unknown.
    package func track(_ listeners: [any Listener]) {
        guard let history = listeners.lazy.compactMap(\.shutdownHistory).first else { return }
        state.withLock { $0.history = history }
    }

    /// Reports failed writes to `logger`: one error when writing starts to fail, one notice
    /// when it works again (`DaemonCommandLine` passes the daemon's).
    package func report(to logger: Logger) {
        state.withLock { $0.logger = logger }
    }

    /// Writes into `directory` from now on.
    package func use(_ directory: TrustedDirectory) {
        state.withLock { $0.directory = directory }
        write()
    }

    private static func began(_ duration: Duration) -> UInt64 {
        let now = MonotonicClock.microseconds()
        let elapsed = duration.microseconds
        return now > elapsed ? now - elapsed : 0
    }

    /// One write `deferral` from now, unless one is already due.
    private func scheduleWrite() {
        state.withLock { state in
            guard state.directory != nil, state.pending == nil else { return }
            let deferral = self.deferral
            state.pending = Task { [weak self] in
                // Cancelled: a write since then (a stop) took this one's place.
                guard (try? await EventLoopExecutor.sleep(for: deferral)) != nil else { return }
                self?.write()
            }
        }
    }

    private func write() {
        // Under the lock: the mediator and the daemon's own tasks both update the file.
        state.withLock { state in
            // This write includes what a due one would have written.
            state.pending?.cancel()
            state.pending = nil
            state.status.previousShutdownClean = state.history?.previousShutdownClean
            let (members, failure) = Self.members(of: state.keys)
            var leftOut = failure.map { "the keys of one addKeys closure cannot be written as JSON (\($0))" }
            state.status.daemonMembers = members
            guard let directory = state.directory else { return }
            // What `status` and `reload` read is at most RuntimeStatus.sizeLimit: a file over it
            // would make an applied reload look unanswered. The daemon's keys are what can grow.
            var bytes = JSONWriter.bytes(state.status.document(), pretty: true, limit: RuntimeStatus.sizeLimit)
            if bytes == nil {
                var libraryOnly = state.status
                libraryOnly.daemonMembers = []
                // The library's keys alone are a few KiB at most (a reason is cut to 4 KiB).
                bytes = JSONWriter.bytes(libraryOnly.document())
                leftOut =
                    "the daemon's status keys make the file longer than the \(RuntimeStatus.sizeLimit / 1024) KiB "
                    + "that 'status' and 'reload' read; keep fewer or shorter keys"
            }
            if leftOut != state.keysLeftOut {
                let file = directory.path(of: RuntimeStatus.fileName)
                if let leftOut {
                    state.logger?.error("The runtime status file \(file) leaves out daemon keys: \(leftOut)")
                } else {
                    state.logger?.notice("The runtime status file \(file) holds the daemon's keys again")
                }
                state.keysLeftOut = leftOut
            }
            // Runtime status lives on tmpfs: atomic rename, no fsync.
            do {
                try directory.writeAtomically(bytes ?? [], to: RuntimeStatus.fileName)
                if state.failing {
                    state.failing = false
                    state.logger?.notice(
                        "The runtime status file \(directory.path(of: RuntimeStatus.fileName)) is written again"
                    )
                }
            } catch {
                // Once per run of failures: `status` and `reload` read this file, and without it
                // a reload that was applied looks unanswered.
                if !state.failing {
                    state.failing = true
                    let file = directory.path(of: RuntimeStatus.fileName)
                    let likely =
                        switch (error as? any ErrnoRepresentable)?.errno {
                        case ENOSPC?, EDQUOT?: "the runtime directory's file system is full: free space there"
                        case EMFILE?, ENFILE?: "no descriptor was left: raise LimitNOFILE="
                        case EFBIG?: "a file-size limit (LimitFSIZE=, ulimit -f) refused it"
                        case EISDIR?: "a directory was planted at status.json: remove it"
                        case EEXIST?, ENOTEMPTY?: "something was planted at status.json.tmp: remove it"
                        default: "check the runtime directory"
                        }
                    state.logger?.error(
                        "Cannot write the runtime status file \(file): \(error); 'status' shows stale data and 'reload' reports no answer until it can (\(likely))"
                    )
                }
            }
        }
    }
}
