import Synchronization
import VigilEventLoop
import VigilPOSIX
import VigilPlatform

/// `eventfd(2)`: Glibc's module does not import <sys/eventfd.h>.
@_silgen_name("eventfd")
private func makeEventDescriptor(_ initial: UInt32, _ flags: Int32) -> Int32

/// The readiness of one listening socket's accepted connections: a thread of its own that waits
/// in `poll(2)` on the listening socket, the connections that wait to read or write, and an
/// eventfd that wakes it when a wait is added or the sequence stops.
///
/// Why a thread: the event loop (``EventLoopExecutor``) has no descriptor readiness to lend, and
/// a blocking `accept` or `read` on it would stall every listener and the watchdog. Tasks never
/// block: they register a wait here and suspend; the thread resumes them when `poll` says the
/// descriptor is ready, when the wait's deadline passes, or when the stop ends it.
///
/// The stop: ``stop(deadline:)`` resumes every wait that is idle (the accept, a connection with
/// no partial request buffered) at once with ``Outcome/stopping``, and bounds every other wait
/// by the deadline. The thread ends once the sequence has stopped and every connection is closed.
final class SocketPoller: Sendable {
    /// How a wait ended.
    enum Outcome: Sendable, Equatable {
        /// The descriptor is ready (or in error: the next call says which).
        case ready
        /// Its deadline (the stop's, or the wait's own) passed first.
        case timedOut
        /// The daemon is stopping and the wait was idle: end quietly.
        case stopping
        /// The task was cancelled, or the connection closed.
        case cancelled
    }

    private struct Waiter {
        var fileDescriptor: Int32
        var events: Int16
        /// `CLOCK_MONOTONIC` nanoseconds, or `nil` for none.
        var deadline: UInt64?
        /// Ends at once when the stop begins (nothing half done).
        var idle: Bool
        var continuation: CheckedContinuation<Outcome, Never>
    }

    private struct State {
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 1
        /// Set by ``stop(deadline:)``: `CLOCK_MONOTONIC` nanoseconds.
        var stopDeadline: UInt64?
        /// Connections accepted and not yet closed.
        var openConnections = 0
        var threadRunning = false
        /// Ids whose cancellation arrived before their wait was registered.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = Mutex(State())
    private let wakeDescriptor: Int32

    init() throws(SystemError) {
        let descriptor = makeEventDescriptor(0, O_CLOEXEC | O_NONBLOCK)  // EFD_CLOEXEC, EFD_NONBLOCK
        guard descriptor >= 0 else {
            throw SystemError(path: "an eventfd", operation: "create", errno: errno)
        }
        wakeDescriptor = descriptor
    }

    deinit {
        _ = close(wakeDescriptor)
    }

    /// The stop's deadline, once it began.
    var stopDeadline: UInt64? { state.withLock { $0.stopDeadline } }

    /// Connections accepted and not yet closed.
    var openConnectionCount: Int { state.withLock { $0.openConnections } }

    /// A new connection is open: the thread stays until it closes.
    func connectionOpened() {
        state.withLock { $0.openConnections += 1 }
    }

    /// A connection closed; its waits (there should be none) end as cancelled.
    func connectionClosed(_ fileDescriptor: Int32) {
        let ended = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            state.openConnections -= 1
            let ids = state.waiters.filter { $0.value.fileDescriptor == fileDescriptor }.map(\.key)
            return ids.compactMap { state.waiters.removeValue(forKey: $0)?.continuation }
        }
        for continuation in ended { continuation.resume(returning: .cancelled) }
        wake()
    }

    /// Begins the stop: idle waits end now, the others by `deadline` (`CLOCK_MONOTONIC` ns).
    /// Only the first call counts.
    func stop(deadline: UInt64) {
        let ended = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            guard state.stopDeadline == nil else { return [] }
            state.stopDeadline = deadline
            for (id, waiter) in state.waiters {
                state.waiters[id]?.deadline = min(waiter.deadline ?? deadline, deadline)
            }
            let idle = state.waiters.filter { $0.value.idle }.map(\.key)
            return idle.compactMap { state.waiters.removeValue(forKey: $0)?.continuation }
        }
        for continuation in ended { continuation.resume(returning: .stopping) }
        wake()
    }

    /// Suspends until `fileDescriptor` is ready for `events`, `deadline` passes, the stop ends
    /// an idle wait, or the task is cancelled. A negative descriptor waits for the deadline only.
    func wait(for fileDescriptor: Int32, events: Int16, idle: Bool, deadline: UInt64? = nil) async -> Outcome {
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        defer {
            // A cancellation that came after the wait ended left its id behind.
            state.withLock { _ = $0.cancelledEarly.remove(id) }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let (immediate, spawn) = state.withLock { state -> (Outcome?, Bool) in
                    if state.cancelledEarly.remove(id) != nil { return (.cancelled, false) }
                    if let stop = state.stopDeadline {
                        if idle { return (.stopping, false) }
                        if MonotonicClock.nanoseconds() >= stop { return (.timedOut, false) }
                    }
                    let bounded = [deadline, state.stopDeadline].compactMap { $0 }.min()
                    state.waiters[id] = Waiter(
                        fileDescriptor: fileDescriptor,
                        events: events,
                        deadline: bounded,
                        idle: idle,
                        continuation: continuation
                    )
                    defer { state.threadRunning = true }
                    return (nil, !state.threadRunning)
                }
                if let immediate {
                    continuation.resume(returning: immediate)
                    return
                }
                if spawn { spawnThread() } else { wake() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
                guard let waiter = state.waiters.removeValue(forKey: id) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return waiter.continuation
            }
            if let continuation {
                continuation.resume(returning: .cancelled)
                wake()
            }
        }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
    }

    private func spawnThread() {
        if (try? SystemThread.startDetached({ self.run() })) == nil {
            // No thread (out of memory or RLIMIT_NPROC): every wait ends at once as ready, so
            // the callers retry their non-blocking call; slower, never stuck.
            let ended = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
                state.threadRunning = false
                defer { state.waiters.removeAll() }
                return state.waiters.values.map(\.continuation)
            }
            for continuation in ended { continuation.resume(returning: .ready) }
        }
    }

    /// The thread: poll, resume what is ready or past its deadline, until stopped and unused.
    private func run() {
        var descriptors: [pollfd] = []
        var ids: [UInt64] = []
        while true {
            let timeout = state.withLock { state -> Int32? in
                if state.stopDeadline != nil && state.openConnections <= 0 && state.waiters.isEmpty {
                    state.threadRunning = false
                    return nil
                }
                descriptors.removeAll(keepingCapacity: true)
                ids.removeAll(keepingCapacity: true)
                descriptors.append(pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0))
                var nearest: UInt64?
                for (id, waiter) in state.waiters {
                    ids.append(id)
                    descriptors.append(pollfd(fd: waiter.fileDescriptor, events: waiter.events, revents: 0))
                    if let deadline = waiter.deadline { nearest = min(nearest ?? deadline, deadline) }
                }
                guard let nearest else { return -1 }
                let now = MonotonicClock.nanoseconds()
                guard nearest > now else { return 0 }
                // Rounded up, so a wait never wakes a little before its deadline and spins.
                return Int32(clamping: (nearest - now + 999_999) / 1_000_000)
            }
            guard let timeout else { return }
            let count = SystemCall.poll(&descriptors, descriptors.count, timeout: timeout)
            if count < 0 && errno != ENOMEM {
                // EFAULT/EINVAL cannot happen with this array; rather than spin, end every wait
                // as ready so each caller's own call reports the failure.
                let ended = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
                    defer { state.waiters.removeAll() }
                    return state.waiters.values.map(\.continuation)
                }
                for continuation in ended { continuation.resume(returning: .ready) }
                continue
            }
            if descriptors[0].revents != 0 {
                var drained: UInt64 = 0
                _ = read(wakeDescriptor, &drained, MemoryLayout<UInt64>.size)
            }
            let now = MonotonicClock.nanoseconds()
            let ended = state.withLock { state -> [(CheckedContinuation<Outcome, Never>, Outcome)] in
                var ended: [(CheckedContinuation<Outcome, Never>, Outcome)] = []
                for (index, id) in ids.enumerated() {
                    guard let waiter = state.waiters[id] else { continue }
                    let outcome: Outcome?
                    if waiter.fileDescriptor >= 0 && descriptors[index + 1].revents != 0 {
                        outcome = .ready
                    } else if let deadline = waiter.deadline, deadline <= now {
                        outcome = .timedOut
                    } else {
                        outcome = nil
                    }
                    if let outcome {
                        state.waiters[id] = nil
                        ended.append((waiter.continuation, outcome))
                    }
                }
                return ended
            }
            for (continuation, outcome) in ended { continuation.resume(returning: outcome) }
        }
    }
}
