/// The time Vigil's timers read and wait on — hook budgets, ``PeriodicTask``-style schedules,
/// the watchdog's rounds, a probe's timeout — as one seam, so that a test can move time by
/// hand instead of sleeping (in the manner of NIO's `NIOAsyncTestingEventLoop.advanceTime`).
///
/// In production it is the monotonic clock (``MonotonicClock``) and its waits are
/// ``EventLoopExecutor/sleep(for:)``: reading it is one `clock_gettime` behind a `nil` check.
/// A test passes a ``ManualClock`` (VigilTesting's `TestClock`) and advances it.
package struct LoopClock: Sendable {
    private let manual: (any ManualClock)?

    /// `CLOCK_MONOTONIC`, with the event loop's timers.
    package static let monotonic = LoopClock(manual: nil)

    private init(manual: (any ManualClock)?) { self.manual = manual }

    /// A clock whose time moves only when `manual` says so.
    package init(_ manual: any ManualClock) { self.manual = manual }

    /// Now, as time since a fixed moment (boot, for the monotonic clock).
    @inline(__always)
    package var now: Duration {
        guard let manual else { return .nanoseconds(Int64(truncatingIfNeeded: MonotonicClock.nanoseconds())) }
        return manual.now
    }

    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled.
    package func sleep(for duration: Duration) async throws {
        guard let manual else { return try await EventLoopExecutor.sleep(for: duration) }
        try await manual.sleep(until: manual.now + max(duration, .zero))
    }
}

/// A clock a test moves by hand: what ``LoopClock`` reads and waits on in place of the
/// monotonic clock.
package protocol ManualClock: AnyObject, Sendable {
    /// Now, as time since the clock's start.
    var now: Duration { get }
    /// Suspends until ``now`` reaches `deadline`; throws `CancellationError` when the task is
    /// cancelled.
    func sleep(until deadline: Duration) async throws
}
