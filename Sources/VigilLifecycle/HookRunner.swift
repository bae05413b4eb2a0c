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

/// Resumes a continuation exactly once, whoever gets there first.
private final class FirstOutcome<Value: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<HookOutcome<Value>, Never>?>(nil)

    func arm(_ continuation: CheckedContinuation<HookOutcome<Value>, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(_ outcome: HookOutcome<Value>) {
        continuation.withLock { $0.take() }?.resume(returning: outcome)
    }
}

extension MediatorCore {
    /// Runs one hook within `budget`, isolated from the mediator.
    ///
    /// The hook runs in its own task so that a hook that ignores cancellation cannot wedge the
    /// mediator: when the budget runs out the hook is cancelled and abandoned, and the mediator
    /// moves on. That is the only reason for the unstructured tasks here.
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
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
        let outcome = await withCheckedContinuation { continuation in
            first.arm(continuation)
            work = Task {
                do {
                    first.resume(.returned(try await body()))
                } catch {
                    first.resume(.threw(error))
                }
            }
            timer = Task {
                do {
                    var remaining = budget
                    if let extendAfter, extendAfter < budget {
                        try await Task.sleep(for: extendAfter)
                        remaining = budget - extendAfter
                        // Ask for the rest of the budget plus a second of slack.
                        self.send([.extendTimeout(microseconds: (remaining + .seconds(1)).microseconds)])
                    }
                    try await Task.sleep(for: remaining)
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
        case .overran, .interrupted: work?.cancel()
        }
        return outcome
    }
}
