import Glibc
import Testing
import Vigil
import VigilTesting

struct HeartbeatState: Codable { var count: Int }

private func writeFile(_ path: String, _ text: String) { TextFile.write(path, text) }

/// The state file under real `kill -9`s of a real process.
@Suite(.serialized) struct PersistenceProcessTests {
    @Test func killNineNeverCorruptsTheStateFileAndCountsNeverGoBackwards() async throws {
        let directory = VigildBinary.temporaryDirectory()
        // The shortest intervals the configuration allows: a heartbeat and a checkpoint every
        // 0.1 s; SIGUSR1s (a forced checkpoint each) put more writes in the way of the kills.
        writeFile(
            directory + "/vigild.json",
            #"{ "heartbeat": { "interval": 0.1 }, "persistence": { "checkpointInterval": 0.1 } }"#
        )
        let statePath = directory + "/state/state.json"
        var last = 0
        var advanced = 0
        var generator = SystemRandomNumberGenerator()
        for round in 1...60 {
            let socket = try FakeNotifySocket()
            let daemon = try DaemonProcess(
                executable: VigildBinary.path,
                arguments: [
                    "run", "--config", directory + "/vigild.json", "--state-directory", directory + "/state",
                    "--runtime-directory", directory + "/run",
                ],
                environment: ["NOTIFY_SOCKET": socket.path],
                outputPath: directory + "/output.log"
            )
            try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
            // The random moment of the kill is the point of the test.
            let kill = ContinuousClock.now + .microseconds(Int.random(in: 0...250_000, using: &generator))
            while ContinuousClock.now < kill {
                daemon.send(SIGUSR1)
                try await Task.sleep(for: .milliseconds(5))
            }
            daemon.send(SIGKILL)
            #expect(try await daemon.waitForExit() == 128 + SIGKILL)
            let store = try StateStore(path: statePath)
            #expect(
                store.restored.movedAside == nil,
                "round \(round): the state file was corrupt: \(store.restored.problem ?? "")"
            )
            let count = try store.value(HeartbeatState.self, forKey: "heartbeat")?.count ?? 0
            #expect(count >= last, "round \(round): the count went back from \(last) to \(count)")
            if count > last { advanced += 1 }
            last = count
        }
        #expect(advanced > 10, "checkpoints happened between kills (\(advanced) of 60 rounds advanced)")
    }

    @Test func aCleanStopSavesAndACrashIsReportedAtTheNextStart() async throws {
        let directory = VigildBinary.temporaryDirectory()
        writeFile(
            directory + "/vigild.json",
            #"{ "heartbeat": { "interval": 0.1 }, "persistence": { "checkpointInterval": 0 } }"#
        )
        let arguments = [
            "run", "--config", directory + "/vigild.json", "--state-directory", directory + "/state",
            "--runtime-directory", directory + "/run",
        ]
        func start() async throws -> (DaemonProcess, FakeNotifySocket) {
            let socket = try FakeNotifySocket()
            let daemon = try DaemonProcess(
                executable: VigildBinary.path,
                arguments: arguments,
                environment: ["NOTIFY_SOCKET": socket.path],
                outputPath: directory + "/output.log"
            )
            try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
            return (daemon, socket)
        }
        func savedCount() throws -> Int {
            try StateStore(path: directory + "/state/state.json").value(HeartbeatState.self, forKey: "heartbeat")?.count
                ?? 0
        }

        let (first, socket) = try await start()
        // SIGUSR1 writes a checkpoint, then reports in STATUS=.
        first.send(SIGUSR1)
        let report = try await socket.datagrams.wait { $0.contains { $0.text.contains("heartbeats") } }.last!
        let reported = Int(report.text.split(separator: " ").dropLast().last!)!
        #expect(try savedCount() >= reported)
        first.send(SIGTERM)
        #expect(try await first.waitForExit() == 0)
        let afterStop = try savedCount()
        #expect(afterStop >= reported)

        let (second, secondSocket) = try await start()
        second.send(SIGUSR1)
        let continued = try await secondSocket.datagrams.wait { $0.contains { $0.text.contains("heartbeats") } }.last!
        #expect(Int(continued.text.split(separator: " ").dropLast().last!)! >= afterStop, "the count continues")
        second.send(SIGKILL)
        _ = try await second.waitForExit()

        let (third, _) = try await start()
        let output = try String(contentsOfFile: directory + "/output.log")
        #expect(output.contains("did not shut down cleanly"))
        #expect(output.contains("MESSAGE_ID=3e4167fd5a4f4684b69749aba65dd187"))
        third.send(SIGTERM)
        #expect(try await third.waitForExit() == 0)
    }
}
