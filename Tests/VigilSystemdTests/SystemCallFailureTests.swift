import Testing
import VigilPOSIX
import VigilPlatform
import VigilSystemd
import VigilTesting

/// Failure modes of sockets through `SystemCall`'s seam: no descriptors left at accept, a full
/// peer queue on a notify send.
@Suite struct SocketSystemCallFailureTests {
    /// Out of descriptors (`EMFILE`) at accept: the connection stays queued and is accepted once
    /// a descriptor may be free again; the sequence neither ends nor throws.
    @Test func outOfDescriptorsAtAcceptWaitsThenAccepts() async throws {
        let directory = ListeningSocketTests.temporaryDirectory()
        let socket = try ListeningSocket.bind(.unix(path: directory + "/emfile.sock"))
        defer { socket.close() }
        let failing = SystemCall.inject(.accept, .descriptor(socket.fileDescriptor), errno: EMFILE, count: 2)
        defer { failing.remove() }
        let connections = try socket.connections()
        let client = try Client(socket.localAddress)
        var iterator = connections.makeAsyncIterator()
        let connection = try #require(try await iterator.next())
        #expect(failing.injected == 2, "two accepts failed with EMFILE before one took the connection")
        try await client.send("after EMFILE\n")
        #expect(try await connection.readLine() == "after EMFILE")
        client.close()
        connection.close()
        connections.stop(gracePeriod: .zero)
    }

    /// "systemd slow to read notifications": a datagram the notify socket refuses with `EAGAIN`
    /// is no failure; it waits on the helper thread and reaches systemd, in order with the next.
    @Test func aNotificationRefusedWithEAGAINIsQueuedAndArrivesInOrder() async throws {
        let peer = try FakeNotifySocket()
        let full = SystemCall.inject(.sendto, .pathContaining(peer.path), errno: EAGAIN)
        defer { full.remove() }
        #expect(SystemdNotifier.send("READY=1", toAddress: peer.path) == nil, "a full queue is no failure")
        #expect(full.injected == 1)
        #expect(SystemdNotifier.send("STATUS=Running", toAddress: peer.path) == nil)
        let received = try await peer.datagrams.wait { $0.count >= 2 }
        #expect(received.map(\.text) == ["READY=1", "STATUS=Running"], "READY=1 is not lost, and comes first")
    }

    /// A full queue at the notify socket (`EAGAIN`, or `ENOBUFS`) is `wouldBlock`, never a
    /// failure, and nothing was sent; the next send goes through.
    @Test(arguments: [EAGAIN, ENOBUFS])
    func aFullPeerQueueWouldBlock(code: Int32) async throws {
        let peer = try FakeNotifySocket()
        let socket = try DatagramSocket(opening: peer.path)
        let failing = SystemCall.inject(.sendto, .pathContaining(peer.path), errno: code)
        defer { failing.remove() }
        #expect(socket.send("READY=1") == .wouldBlock)
        #expect(failing.injected == 1)
        #expect(socket.send("STATUS=after") == .sent)
        let received = try await peer.datagrams.wait { !$0.isEmpty }
        #expect(received.map(\.text) == ["STATUS=after"], "the refused datagram was not sent")
        let refused = SystemCall.inject(.sendto, .pathContaining(peer.path), errno: ECONNREFUSED)
        defer { refused.remove() }
        #expect(socket.send("READY=1") == .failed(ECONNREFUSED))
    }
}
