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
            // Evidence before each kill: this run has checkpointed a count beyond the last
            // round's (read from the file, which is replaced by rename and never half-written),
            // so every round must advance, whatever the load.
            let checkpointed = try await savedCount(statePath, above: last, round: round)
            // The random moment of the kill (after that) is the point of the test.
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
            #expect(count >= checkpointed, "round \(round): the count went back from \(checkpointed) to \(count)")
            #expect(count > last, "round \(round): the count did not advance from \(last) (now \(count))")
            last = count
        }
    }

    /// The state file's shape as vigild writes it: `{"formatVersion": 1, "heartbeat": {"count": N}}`.
    private struct SavedState: Decodable { var heartbeat: HeartbeatState? }

    private struct NoCheckpoint: Error, CustomStringConvertible { let description: String }

    /// Reads the state file of a running vigild (without opening a `StateStore`, which would
    /// tidy the directory under the daemon) until its heartbeat count exceeds `previous`;
    /// returns that count. Fails after `timeout` instead of hanging.
    private func savedCount(
        _ path: String,
        above previous: Int,
        round: Int,
        timeout: Duration = .seconds(30)
    ) async throws -> Int {
        var seen = "no file"
        do {
            return try await poll(for: "a heartbeat count above \(previous)", timeout: timeout) {
                guard let text = TextFile.read(path) else { return nil }
                seen = text
                let saved = try JSONValueDecoder.decode(
                    SavedState.self,
                    from: try JSONParser.parse(Array(text.utf8)),
                    rejectUnknownKeys: false
                )
                return saved.heartbeat.map(\.count).flatMap { $0 > previous ? $0 : nil }
            }
        } catch is PollTimedOut {
            throw NoCheckpoint(
                description: "round \(round): no checkpoint with a heartbeat count above \(previous) in \(path) "
                    + "after \(timeout); last seen: \(seen.prefix(200))"
            )
        }
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

        /// N from the last `STATUS=Running (generation G); N heartbeats` received.
        func reportedCount(_ socket: FakeNotifySocket) async throws -> Int {
            let datagrams = try await socket.datagrams.wait("a STATUS= with heartbeats") {
                $0.contains { $0.text.contains("heartbeats") }
            }
            let report = try #require(datagrams.last { $0.text.contains("heartbeats") })
            let words = report.text.split(separator: " ")
            let count = try #require(words.dropLast().last.flatMap { Int($0) }, "no count in '\(report.text)'")
            try #require(words.last == "heartbeats", "unexpected STATUS text '\(report.text)'")
            return count
        }

        let (first, socket) = try await start()
        // SIGUSR1 writes a checkpoint, then reports in STATUS=.
        first.send(SIGUSR1)
        let reported = try await reportedCount(socket)
        #expect(try savedCount() >= reported)
        first.send(SIGTERM)
        #expect(try await first.waitForExit() == 0)
        let afterStop = try savedCount()
        #expect(afterStop >= reported)

        let (second, secondSocket) = try await start()
        second.send(SIGUSR1)
        #expect(try await reportedCount(secondSocket) >= afterStop, "the count continues")
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
