import CVigilEventLoop
import Synchronization
import VigilPOSIX
import VigilPlatform

/// Calls a handler each time a descriptor is ready (readable, or has priority data as a PSI
/// trigger reports it), until cancelled: on the event loop's epoll, on the loop's thread, when
/// ``EventLoopExecutor`` runs the process (no thread, no wake-up while nothing happens); else on
/// a thread of its own that waits in `poll`.
///
/// Readiness is level-triggered: the handler must consume what made the descriptor ready (read
/// a FIFO's bytes), or stop the watch, or it is called again at once.
package final class DescriptorWatch: Sendable {
    /// What to wait for.
    package struct Events: Sendable, Hashable {
        let bits: UInt32
        /// Bytes to read (`POLLIN`): a FIFO, a socket.
        package static let readable = Events(bits: 0x001)
        /// Priority data (`POLLPRI`): a PSI trigger fired.
        package static let priority = Events(bits: 0x002)
    }

    /// What the kernel reported (`POLLIN` 0x1, `POLLPRI` 0x2, `POLLERR` 0x8, `POLLHUP` 0x10: the
    /// same bits for `poll` and `epoll`).
    package struct Report: Sendable, Hashable {
        package let bits: UInt32
        /// The peer hung up or the descriptor failed: nothing more will come.
        package var isEnd: Bool { bits & (0x008 | 0x010) != 0 }
    }

    /// Setting up the watch failed with this errno.
    package struct Failure: Error, Sendable {
        package let errno: Int32
    }

    private final class Box: Sendable {
        let handler: @Sendable (Report) -> Void
        init(_ handler: @escaping @Sendable (Report) -> Void) { self.handler = handler }
    }

    private enum Path {
        case loop
        /// The thread's id and the socket pair end whose closing wakes it.
        case thread(pthread_t, wake: Int32)
    }

    private let descriptor: Int32
    private let box: Box
    private let path: Mutex<Path?>

    /// Starts watching `descriptor` (which the caller keeps open until ``cancel()``) for
    /// `events`; `handler` hears each report. `onLoop: false` takes a thread even when the loop
    /// runs (its epoll takes 64 watches at most: `ENOSPC`).
    package init(
        descriptor: Int32,
        events: Events,
        onLoop: Bool = true,
        handler: @escaping @Sendable (Report) -> Void
    ) throws(Failure) {
        self.descriptor = descriptor
        let box = Box(handler)
        self.box = box
        if onLoop && EventLoopExecutor.isInstalled {
            let failed = cvigil_loop_watch_descriptor(
                descriptor,
                events.bits,
                { _, revents, context in
                    guard let context else { return }
                    Unmanaged<Box>.fromOpaque(context).takeUnretainedValue().handler(Report(bits: revents))
                },
                Unmanaged.passUnretained(box).toOpaque()
            )
            guard failed == 0 else { throw Failure(errno: failed) }
            path = Mutex(.loop)
            return
        }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw Failure(errno: errno)
        }
        let context = ThreadContext(descriptor: descriptor, events: Int16(events.bits), wake: ends[0], box: box)
        let thread: pthread_t
        do {
            thread = try SystemThread.start { context.run() }
        } catch {
            close(ends[0])
            close(ends[1])
            throw Failure(errno: error.errno)
        }
        path = Mutex(.thread(thread, wake: ends[1]))
    }

    /// The thread's part: `poll` on the descriptor and the wake-up end until the latter hangs up.
    private final class ThreadContext: @unchecked Sendable {
        let descriptor: Int32
        let events: Int16
        let wake: Int32
        let box: Box

        init(descriptor: Int32, events: Int16, wake: Int32, box: Box) {
            self.descriptor = descriptor
            self.events = events
            self.wake = wake
            self.box = box
        }

        func run() {
            defer { close(wake) }
            var entries = [
                pollfd(fd: descriptor, events: events, revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
            ]
            while true {
                entries[0].revents = 0
                entries[1].revents = 0
                let ready = SystemCall.poll(&entries, 2, timeout: -1)
                if ready < 0 { return }
                if entries[1].revents != 0 { return }
                if entries[0].revents != 0 {
                    box.handler(Report(bits: UInt32(UInt16(bitPattern: entries[0].revents))))
                }
            }
        }
    }

    /// Stops the watch; the handler is not called once this returns (when called from the
    /// handler itself, once the handler returns). Idempotent.
    package func cancel() {
        guard let taken = path.withLock({ $0.take() }) else { return }
        switch taken {
        case .loop:
            cvigil_loop_unwatch_descriptor(descriptor)
        case .thread(let thread, let wake):
            close(wake)
            if pthread_equal(thread, pthread_self()) == 0 {
                pthread_join(thread, nil)
            } else {
                pthread_detach(thread)
            }
        }
    }

    deinit { cancel() }
}

extension DescriptorWatch {
    /// Waits until `descriptor` is readable or hangs up (a pidfd: the process ended), without
    /// holding a thread of Swift concurrency: on the event loop's epoll when it runs, else on a
    /// poll thread of the watch's own (also when the loop's 64 watches are taken). Returns
    /// `false` when the task was cancelled first.
    package static func readable(_ descriptor: Int32) async throws(Failure) -> Bool {
        let waiter = ReadinessWaiter()
        let watch: DescriptorWatch
        do {
            watch = try DescriptorWatch(descriptor: descriptor, events: .readable) { _ in waiter.finish(true) }
        } catch  where error.errno == ENOSPC {
            watch = try DescriptorWatch(descriptor: descriptor, events: .readable, onLoop: false) { _ in
                waiter.finish(true)
            }
        }
        waiter.attach(watch)
        defer { watch.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in waiter.wait(continuation) }
        } onCancel: {
            waiter.finish(false)
        }
    }

    /// `pidfd_open(2)`: a descriptor readable once the process `pid` ended, or `-errno`.
    package static func openProcessDescriptor(_ pid: Int32) -> Int32 {
        cvigil_pidfd_open(pid)
    }
}

/// One wait for one report: the first outcome wins, stops the watch (readiness is
/// level-triggered: left on, the loop would report it again and again) and resumes the waiter.
private final class ReadinessWaiter: Sendable {
    private struct State {
        var outcome: Bool?
        var continuation: CheckedContinuation<Bool, Never>?
        var watch: DescriptorWatch?
    }

    private let state = Mutex(State())

    func attach(_ watch: DescriptorWatch) {
        let settled = state.withLock { state -> Bool in
            if state.outcome != nil { return true }
            state.watch = watch
            return false
        }
        if settled { watch.cancel() }
    }

    func wait(_ continuation: CheckedContinuation<Bool, Never>) {
        let outcome = state.withLock { state -> Bool? in
            if state.outcome == nil { state.continuation = continuation }
            return state.outcome
        }
        if let outcome { continuation.resume(returning: outcome) }
    }

    func finish(_ outcome: Bool) {
        let (continuation, watch) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, DescriptorWatch?) in
            guard state.outcome == nil else { return (nil, nil) }
            state.outcome = outcome
            return (state.continuation.take(), state.watch.take())
        }
        watch?.cancel()
        continuation?.resume(returning: outcome)
    }
}
