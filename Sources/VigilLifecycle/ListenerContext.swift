import Logging
import VigilEventLoop

/// What the mediator hands every listener: shared typed values, a logger, and ways to report.
///
/// One context lives as long as the group; hooks receive it on every call.
public final class ListenerContext: Sendable {
    /// Values listeners share: the current configuration, the state store, … (see ``ValueKey``).
    public let values: ValueStore

    /// The daemon's logger.
    public let logger: Logger

    let core: ListenerGroup.Core
    private let budgetsByListener: [String: ListenerBudgets]
    private let defaultBudgets: ListenerBudgets

    init(
        values: ValueStore,
        logger: Logger,
        core: ListenerGroup.Core,
        budgets: [String: ListenerBudgets] = [:],
        defaultBudgets: ListenerBudgets = ListenerBudgets()
    ) {
        self.values = values
        self.logger = logger
        self.core = core
        self.budgetsByListener = budgets
        self.defaultBudgets = defaultBudgets
    }

    /// The budgets the mediator holds the named listener to: its own, or the daemon's defaults,
    /// with the health budget capped at the watchdog probe's timeout (a quarter of
    /// `WatchdogSec=`). A listener that must finish its work before its budget runs out reads its
    /// budget here, at the start of its hook (``ServiceListener`` cancels its part shortly
    /// before the terminate budget ends):
    ///
    /// ```swift
    /// commitReload: { _, context in
    ///     // Stop the old worker; SIGKILL what is left a tenth of the reload budget before it ends.
    ///     let budget = context.budgets(for: "jobs").reload
    ///     let grace = budget - budget / 10
    ///     …
    /// }
    /// ```
    ///
    /// A name no listener has gets the daemon's defaults: pass the listener's own `name`.
    ///
    /// After a second stop request, the terminate budget is at most a second, as the stop holds
    /// the hook to it.
    public func budgets(for listener: String) -> ListenerBudgets {
        var budgets = budgetsByListener[listener] ?? defaultBudgets
        budgets.terminate = core.terminateBudget(budgets.terminate)
        return budgets
    }

    /// How many hooks the mediator abandoned (over their budget, or cut short by a second stop
    /// request) still run: they ignored cancellation, and may go on changing what the
    /// listeners stopping after them saved. A state store keeps its unclean-shutdown marker at
    /// stop while one runs.
    package var abandonedHooksRunning: Int { core.abandoned.running }

    /// The clock the mediator holds hooks to (``ListenerGroup/Configuration/clock``): a listener
    /// that times its own work against its budget (``ServiceListener``) waits on it.
    package var clock: LoopClock { core.clock }

    /// Sleeps for `duration` on the daemon's clock: the event loop's timer in a daemon (as
    /// `EventLoopExecutor.sleep(for:)`), a `TestClock`'s time under the test kit's
    /// `withRunningDaemon(clock:)`, so that a test advances a listener's own delays (a restart
    /// after a pause, a retry) as it advances the budgets.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(for duration: Duration) async throws {
        try await core.clock.sleep(for: duration)
    }

    /// The configuration generation in force: 1 at start, +1 per applied reload.
    public var generation: Int { core.generation }

    /// Sets the daemon's own part of the one-line status the service manager shows (`STATUS=`,
    /// in `systemctl status`), and sends it at once.
    ///
    /// The line is the lifecycle's phase, then yours: `Running (generation 2); 41 heartbeats`.
    /// Yours stays when the lifecycle's part changes — after `READY=1` at start, after each
    /// reload (`Running (generation 3); reload applied; 41 heartbeats`; a rejection stays in
    /// front of yours until the next reload), at stop (`Stopping
    /// (SIGTERM)…; 3 jobs left`) — until you report another. Before start-up ends, the line is
    /// yours alone; a failed start, a fatal fault and a stop with errors show only the error.
    /// Control characters are escaped and the whole line is cut to systemd's limit (1 KiB).
    public func reportStatus(_ text: String) {
        core.sendOwnStatus(Self.keptForStatus(text))
    }

    /// The start of `text` the status line can show: whole characters up to one byte past
    /// the wire's limit (`NotifyMessage.maximumStatusBytes`, where the line is cut with an
    /// ellipsis), counted as the wire
    /// counts them, so a huge report is neither kept nor copied on every later send, and the
    /// line sent is the same. A line break or tab is one space on the wire (`"\r\n"` and
    /// U+2028 too), and escaping only makes every other character longer, so the kept part is
    /// at least as long on the wire as the limit whenever the whole text is.
    package static func keptForStatus(_ text: String) -> String {
        let limit = NotifyMessage.maximumStatusBytes + 1
        guard text.utf8.count > limit else { return text }
        var size = 0
        var end = text.startIndex
        for index in text.indices {
            let character = text[index]
            size += character.isNewline || character == "\t" ? 1 : character.utf8.count
            end = text.index(after: index)
            if size >= limit { break }
        }
        return String(text[..<end])
    }

    /// Declares a fatal fault: the service manager is told to treat the daemon as failed
    /// (`WATCHDOG=trigger`), which restarts it under `Restart=on-failure`.
    ///
    /// - Parameters:
    ///   - reason: what is broken, for the journal and `STATUS=`.
    ///   - listener: who found it.
    public func reportFatalFault(_ reason: String, listener: String) {
        core.observe(.fatalFault(listener: listener, reason: reason))
        core.send(phase: "Fatal fault in \(listener): \(reason)", alone: true) { [$0, .watchdogTrigger] }
    }

    /// Asks the mediator to stop the daemon, as a stop signal would.
    ///
    /// While the daemon stops already it does nothing: only a further request from outside (an
    /// admin's second `SIGTERM`, Ctrl-C twice, the daemon's task cancelled) cuts the stop short,
    /// so a listener may call this from its
    /// `terminate` (a shared shutdown path) without cutting itself or the listeners after it.
    /// Called from `start`, it cancels that start hook, as any stop request during start-up does.
    public func requestTermination(_ reason: String) {
        core.request(.terminate(.requested(reason)))
    }

    /// Asks the mediator to deliver a user-signal event, as the signal itself would.
    public func requestUserSignal(_ signal: ProcessSignal) {
        core.request(.userSignal(signal))
    }

    /// Asks the mediator to reload, as `SIGHUP` would. Requests that come before the mediator
    /// begins the reload they asked for are that one reload (as a burst of `SIGHUP`s is): a test
    /// that wants two reloads awaits the first one's record before it asks for the second.
    public func requestReload() {
        core.request(.reload)
    }
}
