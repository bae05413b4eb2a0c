import Testing
import VigilLifecycle

/// Values from the command line or the environment never trap the process.
@Suite struct ExternalValueTests {
    @Test(arguments: ["SIGRTMIN+2147483647", "SIGRTMAX-2147483647", "RTMIN+99", "SIGRTMIN+-1", "SIGRTMAX--3"])
    func outOfRangeRealTimeSignalNamesAreRejected(name: String) {
        #expect(ProcessSignal(name: name) == nil)
    }

    @Test func realTimeSignalNamesInRangeParse() {
        #expect(ProcessSignal(name: "SIGRTMIN+3") != nil)
        #expect(ProcessSignal(name: "SIGRTMAX-1") != nil)
    }

    @Test func hugeDurationsSaturateInMicrosecondsAndNanoseconds() {
        #expect(Duration.seconds(Int64.max).microseconds == UInt64(Int64.max))
        #expect(Duration.seconds(Int64.max).nanoseconds == UInt64(Int64.max))
        #expect(Duration.seconds(-5).microseconds == 0)
        #expect(Duration.milliseconds(1500).microseconds == 1_500_000)
    }
}
