import Testing
import VigilEventLoop
import VigilPlatform
import VigilTesting

/// The event loop takes over a whole process's executor, so each test runs one scenario of
/// `vigil-loop-probe` (Tests/EventLoopProbe) in a child and reads what it printed.
@Suite struct EventLoopTests {
    /// Runs `scenario` and expects exactly `expected` on its stdout and `status` as its exit status.
    private func expect(
        _ scenario: String,
        prints expected: [String],
        exitStatus: Int32 = 0,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let output = "/tmp/vigil-loop-probe-\(getpid())-\(scenario)"
        unlink(output)
        defer { unlink(output) }
        let probe = try DaemonProcess(
            executable: BuiltExecutable.path(of: "vigil-loop-probe"),
            arguments: [scenario],
            outputPath: output
        )
        let status = try await probe.waitForExit()
        let lines = (TextFile.read(output) ?? "").split(separator: "\n").map(String.init)
        #expect(lines == expected, sourceLocation: sourceLocation)
        #expect(status == exitStatus, sourceLocation: sourceLocation)
    }

    /// One scenario of the probe: what it shows, and exactly what it prints.
    struct Scenario: Sendable, CustomTestStringConvertible {
        let name: String
        let claim: String
        let lines: [String]
        var exitStatus: Int32 = 0
        var testDescription: String { "\(name): \(claim)" }
    }

    static let scenarios = [
        // Before: main-actor jobs went to Dispatch's main queue, which nothing drained: they hung.
        Scenario(
            name: "order",
            claim: "jobs run in order on the loop thread, main-actor jobs too, and no other thread starts",
            lines: [
                "task 1 on the loop thread", "task 2 on the loop thread", "task 3 on the loop thread",
                "main actor on the loop thread", "MainActor.run on the loop thread", "threads=1",
            ]
        ),
        Scenario(
            name: "timers",
            claim: "sleeps wake in deadline order, never early; equal deadlines fire in the order added",
            lines: [
                "slept 10 ms, early=false", "slept 20 ms, early=false", "slept 30 ms, early=false",
                "timer 1", "timer 2", "timer 3", "pending timers=0 threads=1",
            ]
        ),
        Scenario(
            name: "cancel",
            claim: "a cancelled sleep ends at once and leaves no timer behind",
            lines: [
                "pending timers=1", "CancellationError after less than a second: true", "pending timers=0",
                "cancelled before sleeping: CancellationError", "cancel=true again=false", "pending timers=0",
            ]
        ),
        Scenario(
            name: "stop",
            claim: "the loop returns the body's result after queued jobs, whatever timers still wait",
            lines: ["queued job ran", "returned 7"],
            exitStatus: 7
        ),
        Scenario(
            name: "signals",
            claim: "signals arrive from the signalfd on the loop thread, one sent while blocked too",
            lines: [
                "sent before watching: signal \(SIGHUP) on the loop thread",
                "signal \(SIGUSR2) on the loop thread", "signal \(SIGUSR1) on the loop thread",
                "after cancel: SIGUSR1 pending=true", "threads=1",
            ]
        ),
        // Before: the loop ran jobs back to back and asked epoll only when none was left, so a
        // task that yielded forever (or a watchdog behind its schedule) starved SIGTERM.
        Scenario(
            name: "busy",
            claim: "a task that never waits does not starve signals",
            lines: ["while a task spins: signal \(SIGUSR1) on the loop thread", "the spinner ran meanwhile: true"]
        ),
        // Before: a real-time signal nobody owned stayed pending for the life of the process,
        // charged to a user's RLIMIT_SIGPENDING (issue 21, item 9).
        Scenario(
            name: "drain",
            claim: "blocked real-time signals nobody owns are taken, counted and discarded",
            lines: [
                "1000 sent: unowned 1000 of 5", "watched \(SIGUSR1)",
                "pending=false discarded=1000",
            ]
        ),
        // Before: the loop's epoll became fd 0 (issue 21, item 10).
        Scenario(
            name: "standard-descriptors",
            claim: "a closed standard descriptor is /dev/null before the loop opens its own",
            lines: ["fd 0: /dev/null"]
        ),
        // Settles the delay/deadline hooks: in Swift 6.3 `Task.sleep` never reaches them (with
        // counting hooks installed, both stayed at 0), so the loop does not install them and
        // `EventLoopExecutor.sleep` is the way to sleep on the loop.
        Scenario(
            name: "task-sleep",
            claim: "Task.sleep goes to Dispatch: not on the loop's timers, and it starts threads",
            lines: [
                "EventLoopExecutor.sleep: threads=1", "during Task.sleep: pending timers=0",
                "Task.sleep: more threads=true, resumed on the loop thread",
            ]
        ),
        Scenario(
            name: "default-executor",
            claim: "without the takeover, the body runs on the default executor",
            lines: ["installed=false", "returned 3"]
        ),
        // The check and the store are one compare-and-swap, as SwiftNIO does it.
        Scenario(
            name: "refused",
            claim: "another executor's hook (SwiftNIO's takeover, say) is kept and the install fails",
            lines: [
                "install=false theirs kept=true installed=false",
                "after theirs is gone: install=true installed=true",
            ]
        ),
    ]

    @Test(arguments: scenarios) func probe(_ scenario: Scenario) async throws {
        try await expect(scenario.name, prints: scenario.lines, exitStatus: scenario.exitStatus)
    }

    @Test func theClockIsMonotonicAndAgreesWithItself() {
        let first = MonotonicClock.nanoseconds()
        let micro = MonotonicClock.microseconds()
        let second = MonotonicClock.nanoseconds()
        #expect(first <= second)
        #expect(first / 1_000 <= micro && micro <= second / 1_000)
    }
}
