import Synchronization

/// An append-only, thread-safe log of values that tests can await instead of sleeping.
///
/// `wait(until:)` returns as soon as the recorded values satisfy a condition, or throws
/// ``TimedOut`` after a generous deadline so a broken test fails instead of hanging.
public final class AsyncRecorder<Element: Sendable>: Sendable {
    private struct Waiter {
        var condition: @Sendable ([Element]) -> Bool
        var continuation: CheckedContinuation<[Element], any Error>
        /// The deadline, started only once the waiter is registered; cancelled when it is resumed.
        var timer: Task<Void, Never>?
    }

    private struct Storage {
        var values: [Element] = []
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
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
                waiter.timer?.cancel()
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
    /// - Parameters:
    ///   - timeout: a safety net, not a synchronisation device; defaults to 30 s.
    ///   - what: what the test waits for, for the failure message.
    ///   - condition: true once the recorded values are what the test waits for.
    @discardableResult
    public func wait(
        timeout: Duration = .seconds(30),
        _ what: String = "condition",
        until condition: @escaping @Sendable ([Element]) -> Bool
    ) async throws -> [Element] {
        try await withCheckedThrowingContinuation { continuation in
            let (satisfied, id) = storage.withLock { storage -> ([Element]?, Int) in
                if condition(storage.values) { return (storage.values, 0) }
                storage.nextWaiter += 1
                storage.waiters[storage.nextWaiter] = Waiter(condition: condition, continuation: continuation)
                return (nil, storage.nextWaiter)
            }
            if let satisfied { return continuation.resume(returning: satisfied) }
            // The deadline starts only now, with the waiter registered: when it passes, the waiter
            // is there to be failed, or was already resumed by `append` (never lost between the
            // two, however late either task runs on a busy machine).
            let timer = Task { [self] in
                guard (try? await Task.sleep(for: timeout)) != nil else { return }  // resumed in time
                let (waiter, seen) = storage.withLock { ($0.waiters.removeValue(forKey: id), $0.values) }
                waiter?.continuation.resume(
                    throwing: TimedOut(description: "Timed out after \(timeout) waiting for \(what); recorded: \(seen)")
                )
            }
            let resumed = storage.withLock { storage -> Bool in
                guard storage.waiters[id] != nil else { return true }
                storage.waiters[id]?.timer = timer
                return false
            }
            if resumed { timer.cancel() }
        }
    }
}
