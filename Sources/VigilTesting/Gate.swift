import Synchronization

/// A one-way gate: tasks wait at it until a test opens it. Use it to hold a listener inside a
/// hook while the test does something, with no sleeps.
public final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    /// One entry per task that was suspended at the closed gate, in order of arrival.
    private let arrivals = AsyncRecorder<Void>()

    /// A closed gate.
    public init() {}

    /// Waits until the gate is open (returns at once if it is).
    public func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if open { continuation.resume() } else { arrivals.append(()) }
        }
    }

    /// Waits until `count` tasks have been suspended at the closed gate (the number that
    /// arrived, not the number still waiting): a test proves with it that a task is held here
    /// before it opens the gate, without sleeping. Throws ``AsyncRecorder/TimedOut`` after
    /// `timeout` when fewer arrive, e.g. because ``wait()`` returned without suspending.
    public func waitForWaiters(_ count: Int, timeout: Duration = .seconds(30)) async throws {
        try await arrivals.wait(timeout: timeout, "\(count) task(s) suspended at the gate") { $0.count >= count }
    }

    /// Opens the gate for good and releases every waiter.
    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
