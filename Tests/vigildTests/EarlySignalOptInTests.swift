import Glibc
import Testing
import VigilTesting

/// The early block is opt-in: it happens in the processes that link VigilEarlySignals (vigild:
/// EarlySignalTests), not in every process that links Vigil.
@Suite struct EarlySignalOptInTests {
    /// Before: vigildTests depended on the vigild target, so the test runner linked vigild's
    /// preinit function and ran every test with SIGHUP, SIGTERM, … blocked.
    @Test func theTestRunnerStartsWithTheDaemonsSignalsUnblocked() throws {
        // The main thread's mask: nothing in the runner changes it after start.
        let status = try #require(TextFile.read("/proc/self/task/\(getpid())/status"))
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") })
        let mask = try #require(
            UInt64(line.dropFirst("SigBlk:".count).trimmingPrefix { $0 == "\t" || $0 == " " }, radix: 16)
        )
        for signal in [SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2] {
            #expect(mask & (1 << UInt64(signal - 1)) == 0, "signal \(signal) is blocked in the test runner")
        }
    }

}
