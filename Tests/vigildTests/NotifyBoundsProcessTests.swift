import Glibc
import Testing
import Vigil
import VigilTesting

/// A rejected reload with a very long reason still ends in a `READY=1` datagram systemd accepts
/// (issue 10, item 5: `STATUS=` + `READY=1` grew past 4 KiB, systemd ignored it and
/// `systemctl reload` hung).
@Suite(.serialized) struct NotifyBoundsProcessTests {
    @Test func aFiveThousandCharacterReasonStillFitsOneDatagramWithReady() async throws {
        let socket = try FakeNotifySocket()
        // The configuration layer shortens the value it echoes (64 characters), so the reason
        // is made long by the file's path instead: 30 directories of 50 characters.
        var directory = VigildBinary.temporaryDirectory()
        for index in 0..<30 {
            directory += "/" + String(repeating: Character(String(index % 10)), count: 50)
            #expect(mkdir(directory, 0o700) == 0)
        }
        let config = directory + "/vigild.json"
        TextFile.write(config, #"{ "heartbeat": { "interval": 0 } }"#)
        let (daemon, _) = try await VigildBinary.start(socket: socket, arguments: ["--config", config])
        TextFile.write(config, #"{ "logLevel": ""# + String(repeating: "x", count: 5_000) + #"" }"#)
        daemon.send(SIGHUP)
        let datagrams = try await socket.datagrams.wait("the rejected reload's READY=1") { datagrams in
            datagrams.contains { $0.text.contains("reload rejected") }
        }
        let rejected = try #require(datagrams.first { $0.text.contains("reload rejected") })
        #expect(rejected.lines.last == "READY=1", "READY=1 rides in the same, bounded datagram")
        #expect(rejected.text.utf8.count <= NotifyMessage.maximumDatagramBytes)
        let status = try #require(rejected.value("STATUS"))
        #expect(status.hasSuffix("…"), "cut to 1024 bytes: \(status.utf8.count) bytes")
        #expect(status.utf8.count <= 1024 + "…".utf8.count)
        #expect(datagrams.allSatisfy { $0.text.utf8.count <= NotifyMessage.maximumDatagramBytes })
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }
}
