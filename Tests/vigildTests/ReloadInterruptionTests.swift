import Glibc
import Testing
import Vigil
import VigilTesting

/// `systemctl stop` during `systemctl reload` (issue 10, item 11): systemd sends SIGTERM to the
/// daemon and to the waiting `vigild reload` at once. Under systemd 252 a client killed by it
/// makes the unit's Result `signal`, one exiting non-zero `exit-code` (see Tests/EndToEnd/client.sh),
/// so the client must outlive the signal and exit 0 when the daemon stops.
@Suite(.serialized) struct ReloadInterruptionTests {
    struct Running {
        var daemon: DaemonProcess
        var socket: FakeNotifySocket
        var directory: String
        var client: DaemonProcess
        var clientOutput: String
    }

    /// A daemon whose reloads take 3 s, and a `vigild reload` that has sent its signal.
    static func slowReloadInProgress(config: String) async throws -> Running {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        TextFile.write(directory + "/vigild.json", #"{ "heartbeat": { "message": "before" } }"#)
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: [
                "run", "--config", directory + "/vigild.json", "--state-directory", directory + "/state",
                "--runtime-directory", directory + "/run",
            ],
            environment: ["NOTIFY_SOCKET": socket.path, "VIGIL_FAILPOINTS": "reload-slow"],
            outputPath: directory + "/daemon.log"
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        TextFile.write(directory + "/vigild.json", config)
        let clientOutput = directory + "/client.log"
        let client = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["reload", "--runtime-directory", directory + "/run"],
            outputPath: clientOutput
        )
        try await socket.datagrams.wait("RELOADING=1") { $0.contains { $0.lines.contains("RELOADING=1") } }
        return Running(daemon: daemon, socket: socket, directory: directory, client: client, clientOutput: clientOutput)
    }

    @Test func aStopDuringAnAppliedReloadEndsCleanlyForBoth() async throws {
        let running = try await Self.slowReloadInProgress(config: #"{ "heartbeat": { "message": "after" } }"#)
        running.daemon.send(SIGTERM)
        running.client.send(SIGTERM)
        #expect(try await running.client.waitForExit() == 0)
        #expect(try await running.daemon.waitForExit() == 0)
        // The mediator lets the running reload finish before it stops: the answer is the truth.
        #expect(TextFile.read(running.clientOutput)?.contains("reload applied") == true)
    }

    @Test func aStopDuringARejectedReloadEndsCleanlyForBoth() async throws {
        let running = try await Self.slowReloadInProgress(config: #"{ "heartbeat": { "interval": -1 } }"#)
        running.daemon.send(SIGTERM)
        running.client.send(SIGTERM)
        #expect(try await running.client.waitForExit() == 0)
        #expect(try await running.daemon.waitForExit() == 0)
        let output = TextFile.read(running.clientOutput) ?? ""
        #expect(output.contains("reload rejected"), "\(output)")
        #expect(output.contains("SIGTERM while pid \(running.daemon.pid) is stopping: the stop supersedes the reload"))
    }

    @Test func aSignalToTheClientAloneStillGetsTheOutcome() async throws {
        let running = try await Self.slowReloadInProgress(config: #"{ "heartbeat": { "message": "after" } }"#)
        running.client.send(SIGINT)
        #expect(try await running.client.waitForExit() == 0)
        #expect(TextFile.read(running.clientOutput)?.contains("reload applied") == true)
        running.daemon.send(SIGTERM)
        #expect(try await running.daemon.waitForExit() == 0)
    }

    @Test func aSecondSignalEndsTheClientAsTheSignalWould() async throws {
        let running = try await Self.slowReloadInProgress(config: #"{ "heartbeat": { "message": "after" } }"#)
        running.client.send(SIGTERM)
        running.client.send(SIGINT)
        // Pending together, SIGINT is handled first and SIGTERM last: then it ends as a SIGTERM does.
        #expect(try await running.client.waitForExit() == 128 + SIGINT || running.client.exitStatus == 2)
        running.daemon.send(SIGTERM)
        #expect(try await running.daemon.waitForExit() == 0)
    }

    /// A SIGTERM that ends the client (not a stop: the daemon goes on) is no answer, exit 2,
    /// never a death by SIGTERM: the unit's SuccessExitStatus=SIGTERM would make systemd count
    /// that as a reload that succeeded.
    @Test func aClientEndedBySIGTERMExitsTwoNotByTheSignal() async throws {
        let running = try await Self.slowReloadInProgress(config: #"{ "heartbeat": { "message": "after" } }"#)
        // Pending together, the lower-numbered SIGINT is delivered first (and the handlers do not
        // nest), so SIGTERM is the last either way.
        running.client.send(SIGINT)
        running.client.send(SIGTERM)
        #expect(try await running.client.waitForExit() == 2)
        #expect(
            TextFile.read(running.clientOutput)?.contains("SIGTERM before the daemon answered; the outcome is unknown")
                == true
        )
        running.daemon.send(SIGTERM)
        #expect(try await running.daemon.waitForExit() == 0)
    }
}
