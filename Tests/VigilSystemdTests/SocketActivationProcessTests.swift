import Testing
import VigilPlatform
import VigilSystemd
import VigilTesting

/// Socket activation in a real child process (`vigil-socket-probe`): this process binds the
/// sockets and passes them as systemd does (fds 3, 4, …, `LISTEN_FDS`, `LISTEN_FDNAMES`,
/// `LISTEN_PID` = the child's pid); the child adopts one by name.
@Suite struct SocketActivationProcessTests {
    @Test func theChildAcceptsOnThePassedSocketAndItsChildrenInheritNoListenVariables() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let http = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { http.close() }
        let metrics = try ListeningSocket.bind(.unix(path: directory + "/metrics.sock"))
        defer { metrics.close() }
        let port = try #require(http.port)
        let probe = try DaemonProcess(
            executable: Probe.path,
            arguments: ["http", "1"],
            environment: ["NOTIFY_SOCKET": "/run/vigil-probe-notify"],
            outputPath: directory + "/output.log",
            listenFileDescriptors: [
                (fileDescriptor: metrics.fileDescriptor, name: "metrics"),
                (fileDescriptor: http.fileDescriptor, name: "http"),
            ]
        )
        // This process never accepts: the answer can only come from the child, through the
        // descriptor this process bound.
        let client = try SocketClient.connect(to: http.localAddress)
        defer { close(client) }
        let answer = SocketClient.readAll(client)
        #expect(
            answer
                == "origin=adopted:http fd=4 address=127.0.0.1:\(port) cloexec=1 LISTEN_PID=- LISTEN_FDS=- LISTEN_FDNAMES=- NOTIFY_SOCKET=/run/vigil-probe-notify again=alreadyAdopted\n"
        )
        #expect(try await probe.waitForExit() == 0)
    }

    @Test func withoutSocketActivationTheChildBinds() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let probe = try DaemonProcess(
            executable: Probe.path,
            arguments: ["http", "0"],
            environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "http"],
            outputPath: directory + "/output.log"
        )
        #expect(try await probe.waitForExit() == 0)
        let output = TextFile.read(directory + "/output.log") ?? ""
        // LISTEN_PID names another process: inherited, ignored, and still removed.
        #expect(output.hasPrefix("origin=bound fd="), "\(output)")
        #expect(output.contains(" address=127.0.0.1:"), "\(output)")
        #expect(output.contains("LISTEN_PID=- LISTEN_FDS=- LISTEN_FDNAMES=-"), "\(output)")
    }

    @Test func aPassedDatagramSocketIsRefusedWithTheLineTheUnitNeeds() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let datagram = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(datagram) }
        let probe = try DaemonProcess(
            executable: Probe.path,
            outputPath: directory + "/output.log",
            listenFileDescriptors: [(fileDescriptor: datagram, name: "http")]
        )
        #expect(try await probe.waitForExit() == 1)
        #expect(
            TextFile.read(directory + "/output.log")
                == "error: unusable: fd 3 'http' is a datagram socket: use ListenStream=127.0.0.1:0 (not ListenDatagram=) in the .socket unit\n"
        )
    }

    @Test func aSocketUnitWithoutFileDescriptorNameIsNamedInTheError() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let http = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { http.close() }
        let probe = try DaemonProcess(
            executable: Probe.path,
            outputPath: directory + "/output.log",
            listenFileDescriptors: [(fileDescriptor: http.fileDescriptor, name: "app.socket")]
        )
        #expect(try await probe.waitForExit() == 1)
        #expect(
            TextFile.read(directory + "/output.log")
                == "error: notPassed: systemd passed fd 3 'app.socket' but none named 'http': set FileDescriptorName=http in the .socket unit (without it the name is the unit's name)\n"
        )
    }
}

/// The probes built next to this test bundle (`swift build` builds every target).
enum Probe {
    /// `vigil-socket-probe`.
    static var path: String { path(of: "vigil-socket-probe") }

    static func path(of name: String) -> String { BuiltExecutable.path(of: name) }
}

/// `AcceptedConnections` in a socket-activated child: it serves the passed socket line by line,
/// and its stop lets a request that was half sent finish.
@Suite struct AcceptedConnectionsProcessTests {
    @Test func theChildServesThePassedUnixSocketAndDrainsAtStop() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let kv = try ListeningSocket.bind(.unix(path: directory + "/kv.sock"))
        defer { kv.close() }
        let probe = try DaemonProcess(
            executable: Probe.path,
            arguments: ["kv", "0", "--lines"],
            outputPath: directory + "/output.log",
            listenFileDescriptors: [(fileDescriptor: kv.fileDescriptor, name: "kv")]
        )
        // This process never accepts: the answers can only come from the child.
        let inFlight = try Client(kv.localAddress)
        defer { inFlight.close() }
        try await inFlight.send("GET first\n")
        #expect(try await inFlight.line() == "adopted:kv GET first")
        try await inFlight.send("SET half")
        let stopper = try Client(kv.localAddress)
        defer { stopper.close() }
        try await stopper.send("stop\n")
        #expect(try await stopper.line() == "adopted:kv stop")
        // The stopper's connection ends (its next read is idle at stop): the child closes it.
        try await stopper.waitForClose()
        // The half-sent request completes after the stop and is answered.
        try await inFlight.send(" done\n")
        #expect(try await inFlight.line() == "adopted:kv SET half done")
        try await inFlight.waitForClose()
        #expect(try await probe.waitForExit() == 0)
        // The socket stays listening after the child stopped: a client is queued, not refused.
        let later = try Client(kv.localAddress)
        later.close()
    }
}
