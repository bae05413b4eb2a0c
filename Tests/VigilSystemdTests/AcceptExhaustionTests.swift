import Testing
import VigilPOSIX
import VigilPlatform
import VigilSystemd
import VigilTesting

/// Issue 23: out of descriptors, `AcceptedConnections` logged nothing: the connection waited in
/// the socket's queue with no word why. Now, in a child whose RLIMIT_NOFILE leaves room for two
/// connections (vigil-socket-probe --emfile), a third one is logged once as an error naming
/// EMFILE and LimitNOFILE=, the accept backs off (no line per attempt, no spin) and the queued
/// connection is served once a descriptor is free, with one notice.
@Suite struct AcceptExhaustionTests {
    @Test func outOfDescriptorsTheAcceptLogsOnceBacksOffAndResumes() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let socket = try ListeningSocket.bind(.unix(path: directory + "/emfile.sock"))
        defer { socket.close() }
        let output = directory + "/output.log"
        let probe = try DaemonProcess(
            executable: Probe.path,
            arguments: ["emfile", "0", "--emfile"],
            outputPath: output,
            listenFileDescriptors: [(fileDescriptor: socket.fileDescriptor, name: "emfile")]
        )
        let log = { TextFile.read(output) ?? "" }
        try await poll(until: "the probe lowered its RLIMIT_NOFILE, or failed") {
            log().contains("limit ") || log().contains("error")
        }
        try #require(log().contains("limit "), "the probe said: \(log())")
        let first = try Client(socket.localAddress)
        defer { first.close() }
        try await first.send("one\n")
        #expect(try await first.line() == "adopted:emfile one")
        let second = try Client(socket.localAddress)
        defer { second.close() }
        try await second.send("two\n")
        #expect(try await second.line() == "adopted:emfile two")
        let queued = try Client(socket.localAddress)
        defer { queued.close() }
        try await queued.send("three\n")
        try await poll(until: "the error saying the accept fails") { log().contains("error Cannot accept") }
        // What is under test here is time passing: the retries of the next 2 s (50 ms, growing
        // to 500 ms) must log nothing more.
        try await Task.sleep(for: .seconds(2))
        first.close()
        #expect(try await queued.line() == "adopted:emfile three", "served once a descriptor was free")
        let text = try await poll(for: "the notice that accepting resumed") {
            log().contains("notice Accepting") ? log() : nil
        }
        let lines = text.split(separator: "\n").map(String.init)
        let errors = lines.filter { $0.hasPrefix("error ") }
        #expect(errors.count == 1, "\(lines)")
        let error = try #require(errors.first)
        #expect(error.contains("(EMFILE: its limit, RLIMIT_NOFILE, is "), "\(error)")
        #expect(error.contains("raise LimitNOFILE= in the unit"), "\(error)")
        let notice = try #require(lines.first { $0.hasPrefix("notice Accepting connections on ") })
        // "… again after 2.3 s (6 attempts failed)": retried, but not one per millisecond.
        let attempts = notice.split(separator: "(").last.flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
        #expect((3...40).contains(attempts), "\(notice)")
        try await queued.send("stop\n")
        #expect(try await queued.line() == "adopted:emfile stop")
        second.close()
        queued.close()
        #expect(try await probe.waitForExit() == 0)
        // At the limit with no connection waiting (after the third was served), accept4 fails
        // too: that is no failure to report.
        #expect(log().split(separator: "\n").filter { $0.hasPrefix("error ") }.count == 1, "\(log())")
    }
}
