/// What happened, as the mediator reports it to its observers after each step: what comes
/// **out** of a `LifecycleEvent` (what went in).
///
/// The logging listener turns these into journal entries with `MESSAGE_ID`s; the reference
/// daemon records them in its runtime status.
public enum LifecycleRecord: Sendable, Hashable {
    /// Every listener started; `READY=1` was sent.
    case started(generation: Int, timeToReady: Duration)
    /// Start-up failed in the named step or listener.
    case startFailed(listener: String, reason: String)
    /// A reload was applied; `generation` is now current.
    case reloadApplied(generation: Int, duration: Duration)
    /// A reload was rejected; `generation` is still current.
    case reloadRejected(ReloadTransaction.Rejection, generation: Int, duration: Duration)
    /// A user signal was delivered to every listener.
    case userSignal(ProcessSignal)
    /// A memory-pressure event was delivered to every listener; `skipped` reports were dropped
    /// by the rate limit since the previous one of these records.
    case memoryPressure(skipped: Int)
    /// Shutdown began.
    case stopping(TerminationReason)
    /// Every listener stopped (or was skipped by a second stop request).
    case stopped(uptime: Duration)
    /// A listener's hook threw or overran and was isolated; the others still heard the event.
    case listenerFailed(listener: String, event: String, reason: String)
    /// A listener declared a fatal fault; `WATCHDOG=trigger` was sent.
    case fatalFault(listener: String, reason: String)
}

/// Hears the mediator's ``LifecycleRecord``s, synchronously and in order.
public protocol LifecycleObserver: Sendable {
    /// Called once per record on the mediator's task: keep it short and never block.
    func observe(_ record: LifecycleRecord)
}
