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
    public var isReady: Bool {
        state.withLock { state in
            if case .ready = state.outcome { return true }
            return false
        }
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
