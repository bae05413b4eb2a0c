import Glibc
import Testing
import Vigil
import VigilTesting

/// Real signals to a real `vigild` child, observed through a real notify socket, as systemd
/// sees them.
@Suite(.serialized) struct SignalLifecycleTests {
    @Test func hupUsr1AndTermProduceExactlyTheExpectedDatagrams() async throws {
        let socket = try FakeNotifySocket()
        // No heartbeat: the status report's count is 0 however long the steps take on a loaded
        // runner (with the default beat every 5 s, a slow run reported 1 to 4).
        let directory = VigildBinary.temporaryDirectory()
        TextFile.write(directory + "/vigild.json", #"{ "heartbeat": { "interval": 0 } }"#)
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--config", directory + "/vigild.json"],
            directory: directory
        )

        let beforeHUP = MonotonicClock.microseconds()
        daemon.send(SIGHUP)
        let afterReload = try await socket.datagrams.wait("reload READY") { $0.count >= 3 }
        let reloading = afterReload[1]
        #expect(reloading.lines.count == 3)
        #expect(reloading.lines.prefix(2).first == "RELOADING=1")
        let stamp = try #require(reloading.value("MONOTONIC_USEC").flatMap(UInt64.init))
        #expect(
            stamp >= beforeHUP && stamp <= reloading.receivedAt,
            "MONOTONIC_USEC lies between the signal and the receipt"
        )
        #expect(afterReload[2].text == "STATUS=Running (generation 2); reload applied\nREADY=1")

        daemon.send(SIGUSR1)
        let afterUser = try await socket.datagrams.wait("status report") { $0.count >= 4 }
        #expect(afterUser[3].text == "STATUS=Running (generation 2); 0 heartbeats")

        // The daemon's own line outlives the next reload: the lifecycle's part changes, not it.
        daemon.send(SIGHUP)
        let again = try await socket.datagrams.wait("second reload READY") { $0.count >= 6 }
        #expect(again[5].text == "STATUS=Running (generation 3); reload applied; 0 heartbeats\nREADY=1")

        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        // The datagrams were queued before the exit (they outlive the process; the daemon, the
        // process the manager started, waits for no barrier); the fake's reader may still be
        // taking them.
        let all = try await socket.datagrams.wait("STOPPING=1") { $0.contains { $0.lines.contains("STOPPING=1") } }
        #expect(all.map(\.senderPID).allSatisfy { $0 == daemon.pid })
        #expect(
            all.map(\.text).map { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") ? "RELOADING" : $0 } == [
                "STATUS=Running (generation 1)\nREADY=1",
                "RELOADING",
                "STATUS=Running (generation 2); reload applied\nREADY=1",
                "STATUS=Running (generation 2); 0 heartbeats",
                "RELOADING",
                "STATUS=Running (generation 3); reload applied; 0 heartbeats\nREADY=1",
                "STOPPING=1\nSTATUS=Stopping (SIGTERM)…; 0 heartbeats",
            ]
        )
    }

    @Test func sigintStopsCleanly() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(socket: socket)
        daemon.send(SIGINT)
        #expect(try await daemon.waitForExit() == 0)
        let all = try await socket.datagrams.wait("STOPPING=1") { $0.contains { $0.lines.contains("STOPPING=1") } }
        #expect(all.last?.text == "STOPPING=1\nSTATUS=Stopping (SIGINT)…")
    }

    /// The process the manager started exits without waiting for it: everything it sent is in
    /// the manager's queue, which systemd reads before it handles the exit. A manager that
    /// never confirms a barrier gets none, and the daemon says nothing about one.
    @Test func theStartedProcessExitsWithoutWaitingForTheManager() async throws {
        let socket = try FakeNotifySocket(answersBarriers: false)
        let (daemon, directory) = try await VigildBinary.start(socket: socket)
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        let all = try await socket.datagrams.wait("STOPPING=1") { $0.contains { $0.lines.contains("STOPPING=1") } }
        #expect(!all.contains { $0.text == "BARRIER=1" }, "\(all.map(\.text))")
        let output = try String(contentsOfFile: directory + "/output.log")
        #expect(!output.contains("BARRIER=1"), "\(output)")
    }

    /// A manager that never confirms the exit's `BARRIER=1` delays the exit by the bound (1 s),
    /// not more, and the daemon says so. (A process the manager did not start sends one:
    /// `SYSTEMD_EXEC_PID` names another process.)
    @Test func anUnansweredBarrierAtExitCostsOneSecond() async throws {
        let socket = try FakeNotifySocket(answersBarriers: false)
        let (daemon, directory) = try await VigildBinary.start(socket: socket, environment: ["SYSTEMD_EXEC_PID": "1"])
        daemon.send(SIGTERM)
        try await socket.datagrams.wait("BARRIER=1") { $0.contains { $0.text == "BARRIER=1" } }
        let sent = ContinuousClock.now
        #expect(try await daemon.waitForExit() == 0)
        let waited = ContinuousClock.now - sent
        #expect(waited >= .milliseconds(900) && waited < .seconds(10), "exit \(waited) after BARRIER=1")
        let output = try String(contentsOfFile: directory + "/output.log")
        #expect(output.contains("did not confirm the last notifications within 1.0 seconds (BARRIER=1)"), "\(output)")
    }

    @Test func aBurstOfTenThousandHangupsNeverOverlapsAndStillStopsCleanly() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(socket: socket)
        for _ in 0..<10_000 { daemon.send(SIGHUP) }
        // Hang-ups coalesce, and a stop that is pending together with them wins: await one
        // reload before stopping, so that the test does not depend on that race.
        try await socket.datagrams.wait("RELOADING=1") { $0.contains { $0.lines.contains("RELOADING=1") } }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        let all = try await socket.datagrams.wait("STOPPING=1") { $0.contains { $0.lines.contains("STOPPING=1") } }
        let kinds = all.map { datagram -> String in
            if datagram.lines.contains("RELOADING=1") { return "R" }
            if datagram.lines.contains("READY=1") { return "Y" }
            if datagram.lines.contains("STOPPING=1") { return "S" }
            if datagram.text == "BARRIER=1" { return "B" }
            return "?"
        }
        #expect(kinds.first == "Y")
        // A BARRIER=1 after STOPPING=1 when the fake's reader had fallen behind by the stop (the
        // daemon's datagrams then waited in the daemon: net.unix.max_dgram_qlen is 10 here).
        let stopped = kinds.last == "B" ? kinds.dropLast() : kinds[...]
        #expect(stopped.last == "S", "\(kinds.suffix(3))")
        // Between the first READY and STOPPING: strictly RELOADING, READY, RELOADING, READY, …
        let reloads = stopped.dropFirst().dropLast(1)
        #expect(reloads.count % 2 == 0)
        #expect(reloads.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? "R" : "Y") }, "\(kinds)")
        #expect(reloads.count >= 2, "at least one reload happened")
    }

    @Test func aFailedStartExitsNonZeroWithTheListenerAndReason() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run"],
            environment: ["NOTIFY_SOCKET": socket.path, "VIGIL_FAILPOINTS": "start-fail", "SYSTEMD_EXEC_PID": ""],
            outputPath: directory + "/output.log"
        )
        #expect(try await daemon.waitForExit() == 1)
        // The failed start's last STATUS= outlives the process in the fake's queue.
        let failed = "STATUS=Failed to start: failpoints failpoint start-fail is set (VIGIL_FAILPOINTS)"
        let all = try await socket.datagrams.wait("the failure") { $0.contains { $0.text.hasPrefix(failed) } }
        #expect(!all.contains { $0.lines.contains("READY=1") })
        #expect(all.last?.text == failed, "\(all.map(\.text))")
        let output = try String(contentsOfFile: directory + "/output.log")
        #expect(output.contains("<2>Start-up failed in failpoints: failpoint start-fail is set (VIGIL_FAILPOINTS)"))
        // One critical entry, the start-failed one: the daemon's own second line said the same.
        let critical = output.split(separator: "\n").filter { $0.hasPrefix("<2>") }
        #expect(critical.count == 1, "\(critical)")
    }
}

extension String {
    /// Reads a whole file (tests only; no Foundation).
    init(contentsOfFile path: String) throws {
        guard let text = TextFile.read(path) else { throw FileError(path: path) }
        self = text
    }

    struct FileError: Error { var path: String }
}

@Suite(.serialized) struct ReloadSignalTests {
    @Test func aRealTimeReloadSignalAsSystemdsReloadSignalNamesIt() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(socket: socket, arguments: ["--reload-signal", "SIGRTMIN+3"])
        daemon.send(__libc_current_sigrtmin() + 3)
        let applied = "STATUS=Running (generation 2); reload applied\nREADY=1"
        let datagrams = try await socket.datagrams.wait("reload") { $0.contains { $0.text == applied } }
        // By position from the reload, not from the start: what else start-up sends is not this
        // test's subject.
        let reloading = try #require(
            datagrams.firstIndex { $0.lines.first == "RELOADING=1" },
            "\(datagrams.map(\.text))"
        )
        #expect(datagrams.dropFirst(reloading + 1).first?.text == applied, "\(datagrams.map(\.text))")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }
}
