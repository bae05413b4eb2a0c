/// A service with one responsibility that hears the daemon's lifecycle events.
///
/// Implement only the hooks you need; every hook has a no-op default. The mediator
/// (`ListenerGroup`) calls the hooks one event at a time, in dependency order (start, reload,
/// user signals) or in reverse (terminate), each within a time budget. A hook that throws or
/// overruns its budget is isolated: it is reported with the listener's ``name``, and the other
/// listeners still hear the event.
///
/// Listeners talk to each other through typed values in ``ListenerContext/values``, never
/// through globals. A listener that reads a value another listener provides declares that
/// listener in ``dependencies``.
public protocol Listener: Sendable {
    /// A unique name within the group, used in logs, errors and ``dependencies``.
    var name: String { get }

    /// The names of the listeners that must start before this one (and stop after it).
    /// Defaults to none.
    var dependencies: [String] { get }

    /// Time budgets that replace the group's defaults for this listener. Defaults to `nil`.
    var budgets: ListenerBudgets? { get }

    /// Starts the listener. Throwing aborts start-up: listeners already started are stopped in
    /// reverse order and the daemon exits non-zero with this listener's name and the error.
    /// A stop request while it runs (`systemctl stop` during start-up) cancels it; it is waited
    /// for within its start budget, then the daemon stops (this listener's
    /// ``terminate(reason:context:)`` included) without a failed start.
    func start(context: ListenerContext) async throws

    /// Phase one of a reload: check the proposed values (``ReloadTransaction/proposed``) and
    /// accept, or reject with a reason an admin can act on. Do not apply anything yet.
    /// Throwing or overrunning counts as a rejection.
    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision

    /// Phase two of an accepted reload: every listener accepted; apply what was prepared.
    func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws

    /// Phase two of a rejected reload: some listener rejected it (``LifecycleRecord/Event/reloadRejected``);
    /// drop what was prepared and keep running as before.
    func abortReload(_ reload: ReloadTransaction, context: ListenerContext) async

    /// A user signal arrived (`SIGUSR1` by default). Standard signals coalesce in the kernel:
    /// treat this as "requested", never count it.
    func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws

    /// The system or the service's cgroup is short of memory (systemd's `MemoryPressureWatch=`):
    /// release what can be rebuilt — caches, pooled buffers, idle connections. Called at most
    /// once a second (a fixed interval; reports in between are dropped and counted), within the
    /// `ListenerBudgets/memoryPressure` budget. Defaults to doing nothing.
    func memoryPressure(context: ListenerContext) async throws

    /// The daemon is stopping. Listeners stop in reverse dependency order.
    func terminate(reason: TerminationReason, context: ListenerContext) async throws

    /// Answers the watchdog's health probe. Throw (or hang) when the listener is wedged, and
    /// no watchdog ping is sent.
    func checkHealth(context: ListenerContext) async throws

    /// What knows whether the daemon's previous run stopped cleanly (``ShutdownHistory``), for
    /// `status.json`'s `previousShutdownClean`. Defaults to the listener itself when it
    /// conforms to ``ShutdownHistory`` (declare that conformance in the listener's own module),
    /// else `nil`.
    var shutdownHistory: (any ShutdownHistory)? { get }
}

extension Listener {
    public var dependencies: [String] { [] }
    public var budgets: ListenerBudgets? { nil }
    public func start(context: ListenerContext) async throws {}
    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        .accept
    }
    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {}
    public func abortReload(_ reload: ReloadTransaction, context: ListenerContext) async {}
    public func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {}
    public func memoryPressure(context: ListenerContext) async throws {}
    public func terminate(reason: TerminationReason, context: ListenerContext) async throws {}
    public func checkHealth(context: ListenerContext) async throws {}
}

/// A listener's answer to the first phase of a reload.
public enum ReloadDecision: Sendable, Hashable {
    /// The proposed values are fine; commit them when everyone agrees.
    case accept
    /// The proposed values cannot be applied, for this reason (shown to the admin).
    case reject(reason: String)
}
