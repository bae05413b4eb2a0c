import Glibc
import Testing
import VigilTesting

/// vigild (on its event loop) with `MEMORY_PRESSURE_WATCH` naming a FIFO, as a unit's
/// `Environment=` can: each write is one memory-pressure entry, a burst within a second is one,
/// and a path that cannot be watched is a warning, not a failed start.
@Suite struct MemoryPressureProcessTests {
    @Test func aWriteToTheFIFOIsLoggedAsMemoryPressureAndABurstIsRateLimited() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let fifo = directory + "/pressure.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            environment: ["MEMORY_PRESSURE_WATCH": fifo],
            directory: directory
        )
        let log = directory + "/output.log"
        let entries = {
            (TextFile.read(log) ?? "").split(separator: "\n").filter { $0.contains("Memory pressure reported") }
        }
        #expect((TextFile.read(log) ?? "").contains("Watching memory pressure: FIFO \(fifo)"))
        let writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        let began = ContinuousClock.now
        for _ in 0..<20 { #expect(write(writer, "x", 1) == 1) }
        try await poll(until: "a memory-pressure entry in \(log)") { entries().count >= 1 }
        // One entry for a burst written well within the second (the next report may count it).
        if began.duration(to: .now) < .milliseconds(500) { #expect(entries().count == 1, "\(entries())") }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    @Test func aPathThatCannotBeWatchedIsAWarning() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            environment: ["MEMORY_PRESSURE_WATCH": directory + "/none"],
            directory: directory
        )
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        let output = TextFile.read(directory + "/output.log") ?? ""
        #expect(
            output.contains(
                "<4>Not watching memory pressure: cannot watch MEMORY_PRESSURE_WATCH=\(directory)/none: No such file or directory"
            ),
            "\(output)"
        )
    }
}
