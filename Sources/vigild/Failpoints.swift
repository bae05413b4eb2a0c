import Logging
import Vigil
import VigilPlatform

/// Test-only fault injection, off unless `VIGIL_FAILPOINTS` names them (comma-separated):
///
/// - `mediator-stall`: right after readiness the mediator gets stuck in a listener hook that
///   never returns, so health probes go unanswered and the watchdog stops pinging.
/// - `start-fail`: a listener throws during start (the daemon must exit non-zero).
/// - `reload-slow`: every reload takes 3 s (its prepare phase waits; the failpoint listener comes
///   first, so a rejected reload is slow too), for a stop that arrives
///   while `systemctl reload` waits.
/// - `reload-loop`: every reload works for a millisecond without suspending, then asks for the
///   next one as it prepares, so reloads follow one another for as long as the daemon runs, for a stop (and the watchdog) that must still be
///   heard.
/// - `stop-slow`: the stop takes 4 s (its terminate waits), as a graceful drain of in-flight work
///   would, for the watchdog's silence while stopping.
///
/// Never set these in production.
struct Failpoints: Sendable {
    let names: Set<String>

    static func fromEnvironment() -> Failpoints {
        let text = getenv("VIGIL_FAILPOINTS").map { String(cString: $0) } ?? ""
        return Failpoints(names: Set(text.split(separator: ",").map { String($0) }))
    }

    func contains(_ name: String) -> Bool { names.contains(name) }

    /// The listeners that inject the named faults.
    var listeners: [any Listener] {
        names.isEmpty ? [] : [FailpointListener(failpoints: self)]
    }
}

/// Injects the faults named in ``Failpoints``.
struct FailpointListener: Listener {
    let name = "failpoints"
    let failpoints: Failpoints
    /// Never opened: a hook waiting here is wedged for good.
    private let stall = Stall()

    var budgets: ListenerBudgets? {
        // A stall must outlast any watchdog interval, so it gets a day-long budget.
        var budgets = ListenerBudgets()
        budgets.userSignal = .seconds(86_400)
        return budgets
    }

    struct InjectedFailure: Error, CustomStringConvertible {
        var description: String { "failpoint start-fail is set (VIGIL_FAILPOINTS)" }
    }

    func start(context: ListenerContext) async throws {
        if failpoints.contains("start-fail") { throw InjectedFailure() }
        if failpoints.contains("mediator-stall") {
            // Handled right after READY=1: the mediator takes events one at a time.
            context.logger.warning("Failpoint mediator-stall: the mediator will wedge after readiness")
            context.requestUserSignal(.sigusr2)
        }
    }

    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        try await slowReload(context)
        if failpoints.contains("reload-loop") {
            // A millisecond of work that does not suspend: the mediator gets no other chance to
            // let the loop run, and a test's reader keeps up with ~2,000 datagrams a second (a
            // reader that falls behind makes the notifier skip the watchdog's pings).
            usleep(1000)
            context.requestReload()
        }
        return .accept
    }

    private func slowReload(_ context: ListenerContext) async throws {
        guard failpoints.contains("reload-slow") else { return }
        context.logger.warning("Failpoint reload-slow: this reload takes 3 s")
        try await EventLoopExecutor.sleep(for: .seconds(3))
    }

    func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        guard failpoints.contains("stop-slow") else { return }
        context.logger.warning("Failpoint stop-slow: this stop takes 4 s")
        try await EventLoopExecutor.sleep(for: .seconds(4))
    }

    func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        if signal == .sigusr2 && failpoints.contains("mediator-stall") { await stall.forever() }
    }
}

private final class Stall: Sendable {
    func forever() async {
        while true {
            // Ignores cancellation on purpose: a wedged hook.
            try? await EventLoopExecutor.sleep(for: .seconds(3600))
        }
    }
}
