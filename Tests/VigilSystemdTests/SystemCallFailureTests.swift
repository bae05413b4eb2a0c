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

/// The one `sockaddr_un` builder and reader, and the owning descriptor.
@Suite struct SystemCallLayerTypeTests {
    @Test func aUnixSocketAddressFitsSunPathAndReadsBackAsGiven() throws {
        let capacity = UnixSocketAddress.capacity
        #expect(capacity == 108)
        let path = try #require(UnixSocketAddress("/run/systemd/notify"))
        #expect(!path.isAbstract)
        #expect(path.length == socklen_t(2 + 19 + 1), "sun_family, the path and its NUL")
        let abstract = try #require(UnixSocketAddress("@vigil-test"))
        #expect(abstract.isAbstract)
        #expect(abstract.length == socklen_t(2 + 11), "an abstract name has no NUL")
        #expect(UnixSocketAddress("/" + String(repeating: "a", count: capacity - 2)) != nil, "107 bytes and the NUL")
        #expect(UnixSocketAddress("/" + String(repeating: "a", count: capacity - 1)) == nil, "no room for the NUL")
        #expect(
            UnixSocketAddress("@" + String(repeating: "a", count: capacity - 1)) != nil,
            "an abstract name may fill it"
        )
        #expect(UnixSocketAddress("") == nil)
        #expect(UnixSocketAddress("/tmp/a\u{0}b") == nil, "a NUL would cut the path")
        // What the kernel reports for a bound socket reads back as it was given.
        for text in ["@vigil-\(getpid())", ListeningSocketTests.temporaryDirectory() + "/bound.sock"] {
            let address = try #require(UnixSocketAddress(text))
            let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #expect(descriptor >= 0)
            let owned = FileDescriptor(descriptor)
            #expect(SystemCall.bind(owned.rawValue, address) == 0)
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(owned.rawValue, $0, &length) }
            }
            #expect(UnixSocketAddress(storage, length: length).text == text)
        }
    }

    @Test func aFileDescriptorClosesWhenItGoesUnlessTaken() throws {
        let path = ListeningSocketTests.temporaryDirectory() + "/file"
        do {
            let owned = try FileDescriptor(opening: path, O_WRONLY | O_CREAT, mode: 0o600)
            #expect(fcntl(owned.rawValue, F_GETFD) & FD_CLOEXEC != 0, "always close-on-exec")
        }
        // Closed when it went: one end of a socket pair reads the end once the other is closed
        // (a descriptor number alone may be reused by a test running beside this one).
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        do { _ = FileDescriptor(ends[1]) }
        var byte: UInt8 = 0
        #expect(withUnsafeMutableBytes(of: &byte) { SystemCall.read(ends[0], into: $0) } == 0)
        SystemCall.close(ends[0])
        let taken = try FileDescriptor(opening: path, O_RDONLY).take()
        #expect(fcntl(taken, F_GETFD) >= 0, "take() hands it on open")
        SystemCall.close(taken)
        let missing = #expect(throws: SystemError.self) {
            _ = try FileDescriptor(opening: path + ".missing", O_RDONLY, operation: "read")
        }
        #expect(missing?.description == "cannot read \(path).missing: No such file or directory")
    }
}
