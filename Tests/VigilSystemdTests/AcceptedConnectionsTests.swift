import Synchronization
import Testing
import VigilPOSIX
import VigilPlatform
import VigilSystemd
import VigilTesting

/// `AcceptedConnections` and `Connection` on real sockets (TCP and Unix), with blocking clients
/// on threads of their own: accepting, reading lines, writing, the stop that wakes the accept at
/// once and leaves the socket listening, the deadline handed to open connections, hostile lines.
@Suite struct AcceptedConnectionsTests {
    @Test func echoesLinesOverTCPToSeveralClientsAtOnce() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let connections = try socket.connections()
        let server = Task {
            try await withThrowingDiscardingTaskGroup { group in
                for try await connection in connections {
                    group.addTask { try await Self.echo(connection) }
                }
            }
        }
        // Two clients interleaved: the second is answered while the first stays open.
        let first = try Client(socket.localAddress)
        let second = try Client(socket.localAddress)
        try await first.send("hello\n")
        try await second.send("world\r\n")
        #expect(try await second.line() == "echo world from 127.0.0.1:\(second.localPort)")
        #expect(try await first.line() == "echo hello from 127.0.0.1:\(first.localPort)")
        // A line in two pieces is one line.
        try await first.send("in ")
        try await first.send("pieces\n")
        #expect(try await first.line() == "echo in pieces from 127.0.0.1:\(first.localPort)")
        #expect(connections.openConnections == 2)
        first.close()
        second.close()
        connections.stop(gracePeriod: .seconds(5))
        try await server.value
    }

    @Test func aUnixPeerIsNamedByItsCredentials() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let socket = try ListeningSocket.bind(.unix(path: directory + "/kv.sock"))
        defer { socket.close() }
        let connections = try socket.connections()
        let client = try Client(socket.localAddress)
        var iterator = connections.makeAsyncIterator()
        let connection = try #require(try await iterator.next())
        #expect(connection.peer == "pid \(getpid()) uid \(getuid())")
        try await client.send("ping\n")
        #expect(try await connection.readLine() == "ping")
        try await connection.write("pong\n")
        #expect(try await client.line() == "pong")
        client.close()
        // The peer closed: the end of the stream.
        #expect(try await connection.readLine() == nil)
        connection.close()
        #expect(connections.openConnections == 0)
        connections.stop(gracePeriod: .zero)
    }

    @Test func stopWakesAWaitingAcceptAtOnceAndLeavesTheSocketListening() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let connections = try socket.connections()
        let waiting = Task {
            var iterator = connections.makeAsyncIterator()
            return try await iterator.next() != nil
        }
        // Whether the accept is already parked in poll or not yet called, next() ends with nil
        // (stopEndsAnAcceptThatIsAlreadyWaitingInPoll proves the parked case).
        connections.stop(gracePeriod: .seconds(5))
        #expect(try await waiting.value == false)
        #expect(connections.isStopped)
        // Not shut down: a client still connects, and is queued for whoever accepts next (the
        // next instance of the service, with socket activation).
        let late = try Client(socket.localAddress)
        defer { late.close() }
        try await late.send("queued\n")
        let next = try socket.connections()
        var iterator = next.makeAsyncIterator()
        let connection = try #require(try await iterator.next())
        #expect(try await connection.readLine() == "queued")
        connection.close()
        next.stop(gracePeriod: .zero)
    }

    @Test func stopEndsAnAcceptThatIsAlreadyWaitingInPoll() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let connections = try socket.connections()
        let accepted = Mutex(0)
        let server = Task {
            for try await connection in connections {
                accepted.withLock { $0 += 1 }
                connection.close()
            }
        }
        // One connection proves the loop is running and parked in poll again afterwards.
        let client = try Client(socket.localAddress)
        try await client.waitForClose()
        client.close()
        #expect(accepted.withLock { $0 } == 1)
        let clock = ContinuousClock()
        let began = clock.now
        // Ended long before the grace period: a stop that waited for it would take 10 minutes.
        // (A 2 s bound against a 30 s grace failed by 191 ms in CI, beside three booting systemds.)
        connections.stop(gracePeriod: .seconds(600))
        try await server.value
        #expect(clock.now - began < .seconds(20))
    }

    @Test func atStopAnIdleConnectionEndsAndAHalfReceivedRequestFinishesByTheDeadline() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let connections = try socket.connections()
        var iterator = connections.makeAsyncIterator()
        let idleClient = try Client(socket.localAddress)
        let idle = try #require(try await iterator.next())
        // Idle: one request served, then waiting for the next.
        try await idleClient.send("GET a\n")
        #expect(try await idle.readLine() == "GET a")
        try await idle.write("NONE\n")
        #expect(try await idleClient.line() == "NONE")
        // Fresh: connected before the stop, its first request sent after it.
        let freshClient = try Client(socket.localAddress)
        let fresh = try #require(try await iterator.next())
        let busyClient = try Client(socket.localAddress)
        let busy = try #require(try await iterator.next())
        let slowClient = try Client(socket.localAddress)
        let slow = try #require(try await iterator.next())
        #expect(idle.stopDeadline == nil)

        try await busyClient.send("SET k ")
        try await slowClient.send("SET never-finished ")
        let idleRead = Task { try await idle.readLine() }
        let busyRead = Task { try await busy.readLine() }
        let slowRead = Task { try await slow.readLine() }
        let freshRead = Task { try await fresh.readLine() }
        // 6 s: the fresh and the half-received requests must be read within it. With 3 s, they
        // were not once, on a machine running two test suites and a build (the test took 14 s).
        connections.stop(gracePeriod: .seconds(6))
        // Idle: ended at once, as at the end of the stream.
        #expect(try await idleRead.value == nil)
        #expect(idle.stopDeadline != nil)
        // Fresh: its first request, sent after the stop, is still read (a restart loses nothing).
        try await freshClient.send("GET b\n")
        #expect(try await freshRead.value == "GET b")
        // Half a request: the rest arrives after the stop and is answered.
        try await busyClient.send("v\n")
        #expect(try await busyRead.value == "SET k v")
        try await busy.write("OK\n")
        #expect(try await busyClient.line() == "OK")
        // Half a request that never completes: cut at the deadline.
        let deadline = try #require(slow.stopDeadline)
        let error = await #expect(throws: SystemdError.self) { try await slowRead.value }
        #expect(error?.code == .stopDeadlinePassed)
        #expect(ContinuousClock.now >= deadline)
        // Cut at the deadline, not at some later read or never: within 3 s of it. A 1 s bound
        // failed once by 54 ms with a busy loop on one of the two CPUs while the whole suite ran
        // in parallel (issue 22's check): the wake-up was late, not the cut.
        #expect(ContinuousClock.now < deadline.advanced(by: .seconds(3)))
        // After the stop, a connection between requests reads nil at once.
        #expect(try await busy.readLine() == nil)
        for connection in [idle, fresh, busy, slow] { connection.close() }
        for client in [idleClient, freshClient, busyClient, slowClient] { client.close() }
        #expect(try await iterator.next() == nil)
    }

    @Test func hostileLinesAreRefusedWithoutWaitingForever() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let connections = try socket.connections()
        defer { connections.stop(gracePeriod: .zero) }
        var iterator = connections.makeAsyncIterator()

        let long = try Client(socket.localAddress)
        defer { long.close() }
        let first = try #require(try await iterator.next())
        try await long.send(String(repeating: "x", count: 100_000))
        let tooLong = await #expect(throws: SystemdError.self) { try await first.readLine(maximumBytes: 1024) }
        #expect(tooLong?.code == .lineTooLong)

        let cut = try Client(socket.localAddress)
        let second = try #require(try await iterator.next())
        try await cut.send("SET k half")
        cut.close()
        let endedMidLine = await #expect(throws: SystemdError.self) { try await second.readLine() }
        #expect(endedMidLine?.code == .endedMidLine)

        let binary = try Client(socket.localAddress)
        defer { binary.close() }
        let third = try #require(try await iterator.next())
        try await binary.send([0xff, 0xfe, 0x0a])
        let notUTF8 = await #expect(throws: SystemdError.self) { try await third.readLine() }
        #expect(notUTF8?.code == .notUTF8)

        // A limit no line can reach, or below zero, neither traps nor waits.
        let huge = try Client(socket.localAddress)
        defer { huge.close() }
        let limits = try #require(try await iterator.next())
        try await huge.send("fine\nx\n")
        #expect(try await limits.readLine(maximumBytes: .max) == "fine")
        let negative = await #expect(throws: SystemdError.self) { try await limits.readLine(maximumBytes: -1) }
        #expect(negative?.code == .lineTooLong)
        limits.close()

        let silent = try Client(socket.localAddress)
        defer { silent.close() }
        let fourth = try #require(try await iterator.next())
        let timedOut = await #expect(throws: SystemdError.self) {
            try await fourth.readLine(timeout: .milliseconds(100))
        }
        #expect(timedOut?.code == .timedOut)
        for connection in [first, second, third, fourth] { connection.close() }
    }

    @Test func cancellingTheAcceptingTaskEndsTheSequence() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let connections = try socket.connections()
        defer { connections.stop(gracePeriod: .zero) }
        let waiting = Task {
            var iterator = connections.makeAsyncIterator()
            return try await iterator.next() == nil
        }
        waiting.cancel()
        #expect(try await waiting.value)
    }

    static func echo(_ connection: Connection) async throws {
        defer { connection.close() }
        while let line = try await connection.readLine() {
            try await connection.write("echo \(line) from \(connection.peer)\n")
        }
    }
}

/// A blocking client socket whose calls run on a thread of their own (never on the cooperative
/// pool, which the server under test needs).
final class Client: Sendable {
    let fd: Int32
    let localPort: UInt16

    init(_ address: ListeningSocket.LocalAddress) throws {
        let descriptor = try SocketClient.connect(to: address)
        fd = descriptor
        var storage = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        localPort = UInt16(bigEndian: storage.sin_port)
    }

    func close() { _ = Glibc.close(fd) }

    func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) async throws {
        let fd = fd
        let sent = await Self.onThread {
            bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        guard sent == bytes.count else { throw SocketClient.Failure(description: "send: \(sent) of \(bytes.count)") }
    }

    /// One line, without its line break; fails after the 30 s receive timeout.
    func line() async throws -> String {
        let fd = fd
        let bytes = await Self.onThread { () -> [UInt8]? in
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(fd, &byte, 1) == 1 {
                if byte == 10 { return line }
                line.append(byte)
            }
            return nil
        }
        guard let bytes else { throw SocketClient.Failure(description: "no line from the server") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Waits until the server closes the connection.
    func waitForClose() async throws {
        let fd = fd
        _ = await Self.onThread { SocketClient.readAll(fd) }
    }

    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DetachedThread.run { continuation.resume(returning: body()) }
        }
    }
}
