import Synchronization

/// How one hook call ended.
enum HookOutcome<Value: Sendable>: Sendable {
    case returned(Value)
    case threw(any Error)
    /// The budget ran out; the hook was cancelled and abandoned.
    case overran(Duration)
    /// A second stop request cut the hook short.
    case interrupted
}

/// The first outcome wins, whoever gets there first: the hook, its budget timer, or a second
/// stop request. It may come before anyone waits for it (a hook that never suspends).
private final class FirstOutcome<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<HookOutcome<Value>, Never>?
        var outcome: HookOutcome<Value>?
    }

    private let state = Mutex(State())

    /// The outcome if it is already there (then nobody waits for it: the caller does not arm).
    func takeIfDone() -> HookOutcome<Value>? {
        state.withLock { $0.outcome }
    }

    func arm(_ continuation: CheckedContinuation<HookOutcome<Value>, Never>) {
        let ready = state.withLock { state -> HookOutcome<Value>? in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    func resume(_ outcome: HookOutcome<Value>) {
        let continuation = state.withLock { state -> CheckedContinuation<HookOutcome<Value>, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            return state.continuation.take()
        }
        continuation?.resume(returning: outcome)
    }
}

extension MediatorCore {
    /// Runs one hook within `budget`, isolated from the mediator.
    ///
    /// The hook runs in its own task so that a hook that ignores cancellation cannot wedge the
    /// mediator: when the budget runs out the hook is cancelled and abandoned, and the mediator
    /// moves on. That is the only reason for the unstructured tasks here.
    ///
    /// The task starts immediately on the mediator's thread (`Task.immediate`), so a hook that
    /// returns without suspending (most do) costs one task and no thread hop, and no budget
    /// timer is ever armed for it. Only a hook that suspends gets a timer.
    ///
    /// - Parameters:
    ///   - extendAfter: when set and the hook is still running after this long, the service
    ///     manager is told (`EXTEND_TIMEOUT_USEC=`) that the step needs the rest of its budget.
    ///   - interruptible: a second stop request ends the wait at once.
    func runHook<Value: Sendable>(
        budget: Duration,
        extendAfter: Duration? = nil,
        interruptible: Bool = false,
        _ body: @escaping @Sendable () async throws -> Value
    ) async -> HookOutcome<Value> {
        let first = FirstOutcome<Value>()
        let work = Task.immediate {
            do {
                first.resume(.returned(try await body()))
            } catch {
                first.resume(.threw(error))
            }
        }
        if let outcome = first.takeIfDone() { return outcome }
        var timer: Task<Void, Never>?
        let outcome = await withCheckedContinuation { continuation in
            first.arm(continuation)
            timer = Task {
                do {
                    var remaining = budget
                    if let extendAfter, extendAfter < budget {
                        try await EventLoopExecutor.sleep(for: extendAfter)
                        remaining = budget - extendAfter
                        // Ask for the rest of the budget plus a second of slack.
                        self.send([.extendTimeout(microseconds: (remaining + .seconds(1)).microseconds)])
                    }
                    try await EventLoopExecutor.sleep(for: remaining)
                    first.resume(.overran(budget))
                } catch {
                    // Cancelled: the hook finished first.
                }
            }
            if interruptible {
                setInterruption { first.resume(.interrupted) }
            }
        }
        if interruptible { setInterruption(nil) }
        timer?.cancel()
        switch outcome {
        case .returned, .threw: break
        case .overran, .interrupted: work.cancel()
        }
        return outcome
    }
}
