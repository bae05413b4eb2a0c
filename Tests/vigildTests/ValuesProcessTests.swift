import Glibc
import Testing
import Vigil
import VigilTesting

/// Hostile values and files against the real `vigild` binary.
@Suite(.serialized) struct ValuesProcessTests {
    private func checkConfig(_ path: String) async throws -> (status: Int32, output: String) {
        let output = VigildBinary.temporaryDirectory() + "/check.log"
        let process = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["check-config", path],
            outputPath: output
        )
        let status = try await process.waitForExit(timeout: .seconds(10))
        return (status, TextFile.read(output) ?? "")
    }

    /// Used to exit 0, after which a reload trapped in the Int64 conversion.
    @Test func checkConfigRefusesAHugeCheckpointIntervalWithKeyAndRange() async throws {
        let path = VigildBinary.temporaryDirectory() + "/vigild.json"
        TextFile.write(path, #"{"persistence":{"checkpointInterval":9999999999999999999}}"#)
        let (status, output) = try await checkConfig(path)
        #expect(status == 1)
        #expect(
            output
                == "vigild: \(path):1:38: persistence.checkpointInterval: must be 0 (checkpoints only on SIGUSR1 and at stop) "
                + "or a number of seconds from 0.1 to 86400 (found 1e+19)\n"
        )
    }

    /// Used to hang in `open` for ever.
    @Test func checkConfigRefusesAFIFOPromptly() async throws {
        let path = VigildBinary.temporaryDirectory() + "/vigild.json"
        #expect(mkfifo(path, 0o600) == 0)
        let started = ContinuousClock.now
        let (status, output) = try await checkConfig(path)
        #expect(ContinuousClock.now - started < .seconds(20))  // it hung for ever; 20 s for a loaded machine
        #expect(status == 1)
        #expect(output == "vigild: \(path): cannot read the file: it is a FIFO (named pipe), not a regular file\n")
    }

    /// `Int.max` used to overflow at the first heartbeat; `"many"` failed every start with a
    /// debug dump and the failed start rewrote the file.
    @Test(arguments: [
        (#"9223372036854775807"#, "expected a whole number from 0 to 9007199254740991, found 9223372036854775807"),
        (#""many""#, #"expected a whole number, found the string "many""#),
    ])
    func anUnusableCountIsMovedAsideAndTheDaemonCountsFromZero(count: String, reason: String) async throws {
        let directory = VigildBinary.temporaryDirectory()
        let statePath = directory + "/state/state.json"
        #expect(mkdir(directory + "/state", 0o700) == 0)
        let original = #"{"formatVersion": 1, "heartbeat": {"count": \#(count)}}"#
        TextFile.write(statePath, original)
        TextFile.write(directory + "/vigild.json", #"{"heartbeat": {"interval": 0.1}}"#)
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--config", directory + "/vigild.json"],
            directory: directory
        )
        #expect(TextFile.read(statePath + ".corrupt-1") == original, "the original bytes are kept")
        // The daemon runs: SIGUSR1 gets its status report.
        daemon.send(SIGUSR1)
        try await socket.datagrams.wait("a status report") { $0.contains { $0.text.contains("heartbeats") } }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        let output = TextFile.read(directory + "/output.log") ?? ""
        #expect(
            output.contains(
                "The heartbeat count in the state file cannot be used (\(statePath):1:45: heartbeat.count: \(reason); "
                    + "moved the file to \(statePath).corrupt-1); counting from 0"
            ),
            "\(output)"
        )
        #expect(!output.contains("Failure("), "no debug dump")
        let saved = try StateStore(path: statePath).value(HeartbeatState.self, forKey: "heartbeat")?.count ?? 0
        #expect((0...1000).contains(saved))
    }

    /// The security review's state file: 200 arrays nested 250 deep, about 100 KB. The stop's
    /// checkpoint wrote it back as 25 MB (a 1 MiB one as 266 MB, with 330 MB of memory and a
    /// 5.7 s stop). Now it comes back no larger than twice what went in, with the count kept.
    @Test func aDeeplyNestedStateFileComesBackNoLargerThanTwiceItsSize() async throws {
        let directory = VigildBinary.temporaryDirectory()
        let statePath = directory + "/state/state.json"
        #expect(mkdir(directory + "/state", 0o700) == 0)
        let deep = String(repeating: "[", count: 250) + String(repeating: "]", count: 250)
        let original =
            #"{"formatVersion":1,"heartbeat":{"count":1000},"o":["#
            + Array(repeating: deep, count: 200).joined(separator: ",") + "]}"
        TextFile.write(statePath, original)
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(socket: socket, directory: directory)
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        var info = stat()
        #expect(stat(statePath, &info) == 0)
        #expect(Int(info.st_size) <= 2 * original.utf8.count, "\(info.st_size) bytes from \(original.utf8.count)")
        let store = try StateStore(path: statePath)
        #expect(store.restored.movedAside == nil)
        #expect(store.restored.keys == 2, "the nested value is kept")
        #expect(try store.value(HeartbeatState.self, forKey: "heartbeat")?.count ?? 0 >= 1000)
    }
}
