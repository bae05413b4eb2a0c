import Synchronization

/// An append-only, thread-safe log of values that tests can await instead of sleeping.
///
/// `wait(until:)` returns as soon as the recorded values satisfy a condition, or throws
/// ``TimedOut`` after a generous deadline so a broken test fails instead of hanging.
public final class AsyncRecorder<Element: Sendable>: Sendable {
    private struct Waiter {
        var condition: @Sendable ([Element]) -> Bool
        var continuation: CheckedContinuation<[Element], any Error>
    }

    private struct Storage {
        var values: [Element] = []
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
        /// Waiters whose deadline passed before they were registered.
        var expired: Set<Int> = []
    }

    private let storage = Mutex(Storage())

    /// An empty recorder.
    public init() {}

    /// Everything recorded so far, in order.
    public var values: [Element] { storage.withLock { $0.values } }

    /// Records `value` and wakes the waiters whose condition now holds.
    public func append(_ value: Element) {
        let ready = storage.withLock { storage -> [(CheckedContinuation<[Element], any Error>, [Element])] in
            storage.values.append(value)
            var ready: [(CheckedContinuation<[Element], any Error>, [Element])] = []
            for (id, waiter) in storage.waiters where waiter.condition(storage.values) {
                ready.append((waiter.continuation, storage.values))
                storage.waiters[id] = nil
            }
            return ready
        }
        for (continuation, values) in ready { continuation.resume(returning: values) }
    }

    /// The deadline passed before the condition held.
    public struct TimedOut: Error, CustomStringConvertible {
        public let description: String
    }

    /// Waits until `condition` holds for the recorded values and returns them.
    ///
    /// - Parameter timeout: a safety net, not a synchronisation device; defaults to 30 s.
    @discardableResult
    public func wait(
        timeout: Duration = .seconds(30),
        _ what: String = "condition",
        until condition: @escaping @Sendable ([Element]) -> Bool
    ) async throws -> [Element] {
        let id = storage.withLock { storage -> Int in
            storage.nextWaiter += 1
            return storage.nextWaiter
        }
        let timer = Task { [self] in
            try await Task.sleep(for: timeout)
            let (waiter, seen) = storage.withLock { storage in
                let waiter = storage.waiters.removeValue(forKey: id)
                // The deadline can pass before the waiter is registered (a busy machine): mark
                // it, so that registering fails at once instead of waiting forever.
                if waiter == nil { storage.expired.insert(id) }
                return (waiter, storage.values)
            }
            waiter?.continuation.resume(
                throwing: TimedOut(description: "Timed out after \(timeout) waiting for \(what); recorded: \(seen)")
            )
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let outcome = storage.withLock { storage -> Result<[Element], TimedOut>? in
                if condition(storage.values) { return .success(storage.values) }
                if storage.expired.remove(id) != nil {
                    return .failure(
                        TimedOut(
                            description: "Timed out after \(timeout) waiting for \(what); recorded: \(storage.values)"
                        )
                    )
                }
                storage.waiters[id] = Waiter(condition: condition, continuation: continuation)
                return nil
            }
            if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
        }
    }
}
