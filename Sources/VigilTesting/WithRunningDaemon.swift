import Logging
import Vigil

/// A ``Vigil/Daemon`` running in this process, wired to recorders, as ``withRunningDaemon(listeners:budgets:watchdogInterval:values:logger:clock:_:)`` hands it to a test.
public struct RunningDaemon: Sendable {
    /// The daemon's running mediator (the package's own tests drive it directly).
    package let group: ListenerGroup
    /// The context its listeners receive: ask it for a reload, a user signal or a stop as the
    /// daemon's signals would (``VigilLifecycle/ListenerContext/requestReload()``), read the
    /// generation in force and the shared values.
    public var context: ListenerContext { group.context }
    /// Every notification it sent (watchdog pings among them).
    public let notifier: RecordingNotifier
    /// Every lifecycle record it reported.
    public let observer: RecordingObserver
}

/// The daemon ended before it sent `READY=1`, without an error (a stop requested during start).
public struct StoppedBeforeReady: Error, CustomStringConvertible {
    public var description: String {
        "the daemon stopped before it was ready (READY=1 never sent): a stop was requested during start"
    }
}

/// Runs the real ``Vigil/Daemon`` in this process — its lifecycle logger, its watchdog when one is
/// given, its exit path — with a ``RecordingNotifier`` in place of systemd; waits for
/// `READY=1`, runs `body`, then stops the daemon and waits until every listener stopped.
///
/// Throws what made the run fail: the start-up error when the daemon never became ready (at
/// once, not after a timeout), or the error of a stop that failed.
///
/// The daemon owns no signals (tests call ``RunningDaemon/context``'s `requestReload()` and
/// friends instead) and has no watchdog unless `watchdogInterval` is given (what `WatchdogSec=`
/// says: it pings at half of it, after each health probe). Pass a ``TestClock`` to run its
/// budgets, probe timeouts, watchdog rounds and periodic tasks on time the test advances by hand.
public func withRunningDaemon<Result: Sendable>(
    listeners: [any Listener],
    budgets: ListenerBudgets = ListenerBudgets(),
    watchdogInterval: Duration? = nil,
    values: ValueStore = ValueStore(),
    logger: Logger = Logger(label: "vigil-test", factory: { _ in SwiftLogNoOpLogHandler() }),
    clock: TestClock? = nil,
    _ body: (RunningDaemon) async throws -> Result
) async throws -> Result {
    let notifier = RecordingNotifier()
    let observer = RecordingObserver()
    let progress = AsyncRecorder<DaemonProgress>()
    var daemon = Daemon(
        identifier: "vigil-test",
        version: "test",
        listeners: listeners,
        values: values,
        logging: DaemonLogging(levelControl: LogLevelControl(), logger: logger, destination: .syslogPrefixedStderr)
    )
    daemon.notifier = ProgressNotifier(recorder: notifier, progress: progress)
    daemon.signals = SignalMap()
    daemon.budgets = budgets
    daemon.observers = [observer]
    daemon.watchdog = watchdogInterval.map { Watchdog(interval: $0) }
    if let clock { daemon.clock = clock.loopClock }
    let running = Task { [daemon] in
        let failure = await daemon.run(whenCreated: { progress.append(.created($0)) })
        progress.append(.ended(failure))
        return failure
    }
    let group: ListenerGroup
    do {
        let seen = try await progress.wait("READY=1 or the end of the run") {
            $0.contains { $0.isReady || $0.isEnd }
        }
        if let end = seen.first(where: \.isEnd), case .ended(let failure) = end {
            throw failure ?? StoppedBeforeReady()
        }
        // READY=1 comes from the group: it exists.
        guard let created = seen.lazy.compactMap(\.group).first else { throw StoppedBeforeReady() }
        group = created
    } catch {
        running.cancel()  // a stop request, if it still runs
        _ = await running.value
        throw error
    }
    do {
        let result = try await body(RunningDaemon(group: group, notifier: notifier, observer: observer))
        if !group.terminationRequested { group.requestTermination(.requested("test finished")) }
        if let failure = await running.value { throw failure }
        return result
    } catch {
        if !group.terminationRequested { group.requestTermination(.requested("test failed")) }
        _ = await running.value
        throw error
    }
}

/// What `withRunningDaemon` waits for before it runs the test's body.
private enum DaemonProgress: Sendable {
    case created(ListenerGroup)
    case ready
    case ended((any Error)?)

    var group: ListenerGroup? {
        if case .created(let group) = self { return group }
        return nil
    }
    var isReady: Bool {
        if case .ready = self { return true }
        return false
    }
    var isEnd: Bool {
        if case .ended = self { return true }
        return false
    }
}

/// Records into the test's ``RecordingNotifier`` and marks `READY=1` in the progress.
private struct ProgressNotifier: ServiceManagerNotifier {
    let recorder: RecordingNotifier
    let progress: AsyncRecorder<DaemonProgress>

    func notify(_ messages: [NotifyMessage]) throws {
        try recorder.notify(messages)
        if messages.contains(where: \.isReady) { progress.append(.ready) }
    }
}
