import Logging
import VigilLifecycle

/// A ``ListenerGroup`` running in this process, wired to recorders, as ``withRunningDaemon(listeners:startupCommands:budgets:signals:logger:_:)`` hands it to a test.
public struct RunningDaemon: Sendable {
    /// The running mediator.
    public let group: ListenerGroup
    /// Every notification it sent.
    public let notifier: RecordingNotifier
    /// Every lifecycle record it reported.
    public let observer: RecordingObserver
}

/// Starts a ``ListenerGroup`` in this process, waits for `READY=1`, runs `body`, then stops the
/// group and waits until every listener stopped.
///
/// By default the group owns no signals (tests call `requestReload()` and friends instead);
/// pass a ``SignalMap`` to test real signals, and never map `SIGTERM`/`SIGINT` in the test
/// runner.
public func withRunningDaemon<Result: Sendable>(
    listeners: [any Listener],
    startupCommands: [any StartupCommand] = [],
    budgets: ListenerBudgets = ListenerBudgets(),
    signals: SignalMap = SignalMap(),
    logger: Logger = Logger(label: "vigil-test", factory: { _ in SwiftLogNoOpLogHandler() }),
    _ body: (RunningDaemon) async throws -> Result
) async throws -> Result {
    let notifier = RecordingNotifier()
    let observer = RecordingObserver()
    let group = try ListenerGroup(
        listeners: listeners,
        startupCommands: startupCommands,
        configuration: .init(
            logger: logger,
            notifier: notifier,
            signals: signals,
            budgets: budgets,
            observers: [observer]
        )
    )
    let running = Task { try await group.run() }
    do {
        try await notifier.waitForReady()
        let result = try await body(RunningDaemon(group: group, notifier: notifier, observer: observer))
        if !group.terminationRequested { group.requestTermination(.requested("test finished")) }
        try await running.value
        return result
    } catch {
        if !group.terminationRequested { group.requestTermination(.requested("test failed")) }
        _ = try? await running.value
        throw error
    }
}
