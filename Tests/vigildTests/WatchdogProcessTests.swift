import Glibc
import Testing
import VigilTesting

/// The watchdog in a real process: pings at half the interval while healthy, none once the
/// mediator is wedged (`VIGIL_FAILPOINTS=mediator-stall`).
@Suite(.serialized) struct WatchdogProcessTests {
    @Test func pingsAtHalfTheIntervalWhileHealthy() async throws {
        let socket = try FakeNotifySocket()
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let spawned = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        let (daemon, _) = try await VigildBinary.start(socket: socket, environment: ["WATCHDOG_USEC": "200000"])
        let pings = try await socket.datagrams.wait("6 pings") { $0.filter { $0.text == "WATCHDOG=1" }.count >= 6 }
            .filter { $0.text == "WATCHDOG=1" }
        // The watchdog's schedule begins as the daemon runs (after the spawn; READY=1 may come
        // later under load, which made a bound from READY=1 fail: 525 ms with a busy loop on the
        // test's CPU), and a ping never goes out before its turn: the sixth, at 100 ms each,
        // at least 0.6 s after the spawn (pinging at a quarter of the interval would take 0.3 s).
        #expect(pings[5].receivedAt - spawned >= 600_000)
        #expect(pings.allSatisfy { $0.senderPID == daemon.pid })
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    @Test func noPingsOnceTheMediatorIsWedged() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run"],
            environment: [
                "NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "200000", "VIGIL_FAILPOINTS": "mediator-stall",
            ],
            outputPath: directory + "/output.log"
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        // Absence of pings is shown by probes that failed: three withheld pings (whatever the
        // load makes of their timing), and not one WATCHDOG=1 before or between them.
        let log = directory + "/output.log"
        try await poll(until: "three withheld watchdog pings in \(log)") {
            (TextFile.read(log) ?? "").split(separator: "\n").filter { $0.contains("withholding the watchdog ping") }
                .count >= 3
        }
        #expect(!socket.datagrams.values.contains { $0.text == "WATCHDOG=1" })
        daemon.send(SIGKILL)
        _ = try await daemon.waitForExit()
    }
}
