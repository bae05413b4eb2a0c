import InMemoryLogging
import Logging
import Testing

@testable import VigilLifecycle

/// Discarded signals are logged rate-limited, real-time and ignored standard signals apart.
@Suite struct DiscardedSignalLogTests {
    /// Before: one limit for both kinds, so a SIGHUP ignored within a minute of a logged
    /// real-time discard got no line of its own (only a count, a minute later).
    @Test func anIgnoredSighupIsNamedRightAfterARealTimeFlood() {
        let handler = InMemoryLogHandler()
        let log = DiscardedSignalLog(logger: Logger(label: "t") { _ in handler })
        let realTime = ProcessSignal(rawValue: ProcessSignal.realTimeMinimum + 2)
        for _ in 0..<100 { log.record(realTime) }
        log.record(.sighup)
        log.record(.sighup)
        let lines = handler.entries.map { $0.message.description }
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.hasPrefix("Discarded \(realTime): nothing in this daemon owns it") == true, "\(lines)")
        #expect(lines.last?.hasPrefix("Discarded SIGHUP: it is not this daemon's reload signal") == true, "\(lines)")
    }
}
