import Logging
import Synchronization
import VigilEventLoop

/// Reports the signals the event loop took and discarded because nobody owns them (real-time
/// signals: see ``EventLoopExecutor/discardedSignals``), rate-limited: the first one at once, then
/// at most one line a minute with the count since the last line, so a flood of 100,000 signals
/// costs two lines, not 100,000. Real-time signals and the standard ones the daemon ignores (a
/// SIGHUP when `--reload-signal` chose another) are counted and limited apart: a flood of one
/// kind does not hide the first of the other.
final class DiscardedSignalLog: Sendable {
    private struct State {
        /// When the last line was written (monotonic ns); `nil` before the first.
        var lastLine: UInt64?
        /// Discarded since the last line.
        var unreported: UInt64 = 0
        /// The last signal discarded.
        var last: ProcessSignal?
        /// A line for `unreported` is scheduled.
        var flushScheduled = false
    }

    /// At most one line per this many nanoseconds.
    static let interval: UInt64 = 60_000_000_000

    private let logger: Logger
    /// Real-time signals first, then the standard ones.
    private let state = Mutex([State(), State()])

    init(logger: Logger) { self.logger = logger }

    /// Counts one discarded signal (on the loop thread); logs now, or schedules the next line.
    func record(_ signal: ProcessSignal) {
        let now = MonotonicClock.nanoseconds()
        let kind = Self.kind(of: signal)
        let (logNow, scheduleIn): (Bool, UInt64?) = state.withLock { states in
            var state = states[kind]
            defer { states[kind] = state }
            state.last = signal
            if let last = state.lastLine, now &- last < Self.interval {
                state.unreported += 1
                guard !state.flushScheduled else { return (false, nil) }
                state.flushScheduled = true
                return (false, Self.interval - (now &- last))
            }
            state.lastLine = now
            return (true, nil)
        }
        if logNow {
            let text =
                signal.rawValue >= ProcessSignal.realTimeMinimum
                ? "Discarded \(signal): nothing in this daemon owns it. Unowned real-time signals are taken and "
                    + "dropped, so that they do not stay queued against RLIMIT_SIGPENDING; more are "
                    + "counted and reported at most once a minute (\(EventLoopExecutor.discardedSignals) so far)."
                : "Discarded \(signal): it is not this daemon's reload signal (--reload-signal chose another), and "
                    + "nothing else in it owns it; more are counted and reported at most once a minute."
            logger.warning("\(text)", metadata: ["VIGIL_SIGNAL": "\(signal)"])
        }
        if let scheduleIn {
            // Unstructured: the line must come after the burst ends, whichever task is running;
            // it holds nothing but this log, and the process may exit before it fires.
            Task {
                try? await EventLoopExecutor.sleep(for: .nanoseconds(Int64(clamping: scheduleIn)))
                self.flush(kind)
            }
        }
    }

    /// The index of `signal`'s count: 0 for a real-time signal, 1 for a standard one.
    private static func kind(of signal: ProcessSignal) -> Int {
        signal.rawValue >= ProcessSignal.realTimeMinimum ? 0 : 1
    }

    private func flush(_ kind: Int) {
        let (count, last) = state.withLock { states -> (UInt64, ProcessSignal?) in
            defer {
                states[kind].unreported = 0
                states[kind].flushScheduled = false
                states[kind].lastLine = MonotonicClock.nanoseconds()
            }
            return (states[kind].unreported, states[kind].last)
        }
        guard count > 0 else { return }
        let text =
            "Discarded \(count) more signal\(count == 1 ? "" : "s") this daemon does not act on in the last minute"
            + (last.map { " (the last \($0))" } ?? "")
            // The loop's count is of the real-time signals it took; an ignored SIGHUP is not among them.
            + ((last?.rawValue ?? ProcessSignal.realTimeMinimum) >= ProcessSignal.realTimeMinimum
                ? "; \(EventLoopExecutor.discardedSignals) since the start." : ".")
        logger.warning("\(text)", metadata: ["VIGIL_SIGNALS_DISCARDED": "\(count)"])
    }
}
