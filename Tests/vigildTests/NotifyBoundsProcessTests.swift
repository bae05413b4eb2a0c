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
        let directory = VigildBinary.temporaryDirectory()
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
        #expect(rejected.value("STATUS")?.hasSuffix("…") == true)
        #expect(datagrams.allSatisfy { $0.text.utf8.count <= NotifyMessage.maximumDatagramBytes })
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }
}
