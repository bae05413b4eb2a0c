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

    /// `systemctl stop` right behind `systemctl reload`, the stop's SIGTERM reaching the client
    /// after it exec'd (vigild blocks it from its first instruction) but before it found the
    /// daemon, which has stopped by then: the stop supersedes the reload, exit 0 (issue 21, a
    /// CI run on systemd 252 with `Result=exit-code`). Without the SIGTERM the same client says
    /// the daemon is not running, exit 2.
    @Test func aStopThatEndedTheDaemonBeforeTheClientSignalledItSupersedesTheReload() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: [
                "run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run",
            ],
            environment: ["NOTIFY_SOCKET": socket.path],
            outputPath: directory + "/daemon.log"
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        daemon.send(SIGTERM)
        // Reaped: its pid names no process, as a daemon's that systemd reaped.
        #expect(try await daemon.reap() == 0)
        // SIGTERM pending across exec, as when systemd's stop signals the control process
        // between its exec and its first look at the status file.
        let pendingSIGTERM = """
            import os, signal, sys
            if sys.argv[1] == "pending":
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                os.kill(os.getpid(), signal.SIGTERM)
            os.execv(sys.argv[2], sys.argv[2:])
            """
        for pending in [true, false] {
            let output = directory + "/client-\(pending).log"
            let client = try DaemonProcess(
                executable: "/usr/bin/python3",
                arguments: [
                    "-c", pendingSIGTERM, pending ? "pending" : "none", VigildBinary.path, "reload",
                    "--runtime-directory", directory + "/run",
                ],
                outputPath: output
            )
            let status = try await client.waitForExit()
            let text = TextFile.read(output) ?? ""
            if pending {
                #expect(status == 0, "\(text)")
                #expect(
                    text.contains("SIGTERM while pid \(daemon.pid) is stopping: the stop supersedes the reload"),
                    "\(text)"
                )
            } else {
                #expect(status == 2, "\(text)")
                #expect(text.contains("pid \(daemon.pid) named in"), "\(text)")
            }
        }
    }
}
