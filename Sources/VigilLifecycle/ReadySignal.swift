import Synchronization

/// What a long-running part calls when it is ready: it has bound its socket, opened its
/// database, and can serve. ``ServiceListener`` finishes its start (and so lets `READY=1` go
/// out) only then.
///
/// ```swift
/// ServiceListener(name: "http") { ready in
///     Application(router: router, onServerRunning: { _ in ready() })
/// }
/// ```
///
/// Calling it more than once is harmless: only the first call counts. It may be called from any
/// thread or task.
///
/// It is also how the part learns that the daemon stops, and by when it should be done:
/// ``onStop(_:)``, ``waitForStop()`` and ``stopDeadline``: the instant by which it should have
/// drained, derived from the listener's terminate budget (``ServiceListener`` cancels the part at
/// the budget minus a tenth of it, at most a second less; the deadline comes a twentieth of that
/// grace period, at most half a second, earlier, to leave time to close and return), so a drain
/// needs no arithmetic:
///
/// ```swift
/// ready.onStop { deadline in connections.stop(deadline: deadline) }
/// ```
public final class ReadySignal: Sendable {
    /// How the wait for readiness ended.
    enum Outcome: Sendable {
        /// The part said it is ready.
        case ready
        /// The part ended (returned, or threw this error) before it said so.
        case ended((any Error)?)
        /// The start was cancelled (its budget ran out) before either.
        case cancelled
    }

    private struct State {
        var outcome: Outcome?
        var waiter: CheckedContinuation<Outcome, Never>?
        var stopDeadline: ContinuousClock.Instant?
        var stopHandlers: [@Sendable (ContinuousClock.Instant) -> Void] = []
        /// The tasks in ``waitForStop()``, by a number of their own (so a cancelled one can
        /// leave).
        var stopWaiters: [Int: CheckedContinuation<ContinuousClock.Instant, any Error>] = [:]
        var nextStopWaiter = 0
    }

    private let state = Mutex(State())

    /// The daemon's context, for a part that needs shared values (the current configuration,
    /// say) or the logger.
    public let context: ListenerContext

    init(context: ListenerContext) {
        self.context = context
    }

    /// Says the part is ready. Only the first call counts.
    public func callAsFunction() {
        settle(.ready)
    }

    /// `true` once the part said it is ready.
    package var isReady: Bool {
        state.withLock { state in
            if case .ready = state.outcome { return true }
            return false
        }
    }

    /// The instant by which the part should have drained, once the daemon began to stop; `nil`
    /// while it runs. Shortly after it (see the type's documentation) the part is cancelled and
    /// the stop counts as failed.
    public var stopDeadline: ContinuousClock.Instant? {
        state.withLock { $0.stopDeadline }
    }

    /// Calls `handler` with the stop deadline when the daemon begins to stop (at once, on the
    /// calling thread, if it already began), before swift-service-lifecycle's graceful shutdown
    /// reaches the part. Keep it short and non-blocking: stop accepting, hand the deadline on.
    ///
    /// A second stop request (a second `SIGTERM`) moves the deadline to that instant: `handler`
    /// is called once more, with it, just before the part is cancelled; a drain that waits for
    /// the deadline should take the earlier of the two. So never resume a continuation here (a
    /// second resume traps): to wait for the stop, call ``waitForStop()``.
    public func onStop(_ handler: @escaping @Sendable (ContinuousClock.Instant) -> Void) {
        let deadline = state.withLock { state -> ContinuousClock.Instant? in
            state.stopHandlers.append(handler)
            return state.stopDeadline
        }
        if let deadline { handler(deadline) }
    }

    /// Waits until the daemon begins to stop and returns the stop deadline (at once, if it
    /// already began): for a part with nothing to drain, or that drains after it.
    ///
    /// ```swift
    /// ServiceListener(name: "jobs") { ready in
    ///     ready()
    ///     let deadline = try await ready.waitForStop()
    ///     // stop the jobs, wait for them until `deadline`
    /// }
    /// ```
    ///
    /// It returns once. An ``onStop(_:)`` handler is called again by a second stop request, so
    /// a continuation resumed from one would be resumed twice, which traps: wait here instead.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled before the stop begins
    ///   (the part is cancelled when its start budget runs out, or at the end of its grace).
    public func waitForStop() async throws -> ContinuousClock.Instant {
        let id = state.withLock { state in
            defer { state.nextStopWaiter += 1 }
            return state.nextStopWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let answer = state.withLock { state -> Result<ContinuousClock.Instant, any Error>? in
                    if let deadline = state.stopDeadline { return .success(deadline) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.stopWaiters[id] = continuation
                    return nil
                }
                if let answer { continuation.resume(with: answer) }
            }
        } onCancel: {
            state.withLock { $0.stopWaiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }

    /// Begins the stop: records the deadline, calls the stop handlers (once) and ends the waits
    /// of ``waitForStop()``.
    func beginStop(deadline: ContinuousClock.Instant) {
        announceStop(deadline) { $0 == nil }
    }

    /// A second stop request: the deadline becomes `now` (if it was later, or not set) and the
    /// stop handlers hear it again.
    func hurry(now: ContinuousClock.Instant) {
        announceStop(now) { current in current.map { $0 > now } ?? true }
    }

    /// Sets the stop deadline to `deadline` when `due` says so of the current one, then calls
    /// the stop handlers with it and ends the waits of ``waitForStop()`` (which are waiting only
    /// until the first deadline is set).
    private func announceStop(
        _ deadline: ContinuousClock.Instant,
        when due: (ContinuousClock.Instant?) -> Bool
    ) {
        let announced = state.withLock { state in
            guard due(state.stopDeadline) else {
                return (
                    handlers: [@Sendable (ContinuousClock.Instant) -> Void](),
                    waiters: [CheckedContinuation<ContinuousClock.Instant, any Error>]()
                )
            }
            state.stopDeadline = deadline
            defer { state.stopWaiters.removeAll() }
            return (handlers: state.stopHandlers, waiters: Array(state.stopWaiters.values))
        }
        for handler in announced.handlers { handler(deadline) }
        for waiter in announced.waiters { waiter.resume(returning: deadline) }
    }

    /// Records how the wait ended, unless it already did; wakes the waiter.
    func settle(_ outcome: Outcome) {
        let waiter = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            return state.waiter.take()
        }
        waiter?.resume(returning: outcome)
    }

    /// Waits until the part is ready, has ended, or the calling task is cancelled.
    func wait() async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let settled = state.withLock { state -> Outcome? in
                    if let outcome = state.outcome { return outcome }
                    state.waiter = continuation
                    return nil
                }
                if let settled { continuation.resume(returning: settled) }
            }
        } onCancel: {
            settle(.cancelled)
        }
    }
}
