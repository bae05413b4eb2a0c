import Glibc
import Logging
import Testing
import VigilSystemd
import VigilTesting

/// A bound datagram socket that nobody reads until the test says so: a frozen journald or
/// systemd, as their queues see it.
private final class StalledPeer {
    let path: String
    private(set) var descriptor: Int32
    private let directory: String

    init() throws {
        var template = Array("/tmp/vigil-peer-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        path = directory + "/socket"
        descriptor = try UnixDatagramSocket.bind(path: path)
    }

    deinit {
        close(descriptor)
        unlink(path)
        rmdir(directory)
    }

    /// Closes the socket and binds a new one at the same path: journald restarted without its
    /// socket unit, as the sender sees it (a connected socket's peer is gone).
    /// Shut down before it is closed: a child process another test forks meanwhile may hold a
    /// copy of the descriptor until its exec, and the socket would outlive the close (an entry
    /// sent to it was lost: one run in three with a busy loop on a CPU).
    func remake() throws {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        unlink(path)
        descriptor = try UnixDatagramSocket.bind(path: path)
    }

    /// Shuts the socket down for reading but keeps it open (another process holds a copy of
    /// journald's socket), and binds a new one at the path. Returns the old descriptor, which
    /// the caller closes.
    func remakeKeepingTheOldShutDown() throws -> Int32 {
        let old = descriptor
        shutdown(old, Int32(SHUT_RDWR))
        unlink(path)
        descriptor = try UnixDatagramSocket.bind(path: path)
        return old
    }

    /// Binds a new socket at the path while the old one stays open (and unread): a socket unit
    /// restarted while the old journald still holds its socket. Returns the old descriptor,
    /// which the caller closes.
    func replaceKeepingTheOldOpen() throws -> Int32 {
        let old = descriptor
        unlink(path)
        descriptor = try UnixDatagramSocket.bind(path: path)
        return old
    }

    /// Everything queued so far, without waiting.
    func drain() -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes {
                recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            guard count >= 0 else { return datagrams }
            datagrams.append(Array(buffer[0..<count]))
        }
    }

    /// Calls `receive` (a `recv` or `recvmsg` of the socket) until it returns a datagram, or no
    /// datagram came within `seconds`. A signal interrupts the wait (`EINTR`; with a receive
    /// timeout the kernel never restarts the call), and the test runner takes real signals
    /// from other suites (InProcessSignalTests): retried, with the time that is left.
    private func waiting<Result>(seconds: Int, _ receive: () -> (Int, Result)) -> (Int, Result) {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let left = max(deadline - ContinuousClock.now, .milliseconds(1)).components
            var timeout = timeval(tv_sec: Int(left.seconds), tv_usec: Int(left.attoseconds / 1_000_000_000_000))
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let outcome = receive()
            guard outcome.0 < 0, errno == EINTR, ContinuousClock.now < deadline else { return outcome }
        }
    }

    /// The next datagram and the `st_dev`/`st_ino` of the one descriptor passed with it
    /// (`SCM_RIGHTS`), if any; waits up to 10 seconds. Closes the received descriptor.
    func receiveWithDescriptor() -> (text: String, passed: FakeNotifySocket.Datagram.PassedDescriptor?)? {
        var buffer = [UInt8](repeating: 0, count: 8192)
        var control = [UInt8](repeating: 0, count: 64)
        let (count, passed) = waiting(seconds: 10) {
            let received = FakeNotifySocket.receiveDatagram(descriptor, into: &buffer, control: &control)
            return (received.count, received.passed)
        }
        guard count >= 0 else { return nil }
        return (String(decoding: buffer[0..<count], as: UTF8.self), passed.first)
    }

    /// The next datagram, waiting up to `seconds`.
    func receive(seconds: Int = 10) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        let (count, _) = waiting(seconds: seconds) {
            (buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }, ())
        }
        return count >= 0 ? Array(buffer[0..<count]) : nil
    }
}

/// Parses journald's native protocol: `NAME=value\n`, or `NAME\n` + LE64 length + value + `\n`.
private func nativeFields(_ bytes: [UInt8]) -> [String: String] {
    var fields: [String: String] = [:]
    var index = 0
    while index < bytes.count {
        guard let end = bytes[index...].firstIndex(where: { $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\n") })
        else { break }
        let name = String(decoding: bytes[index..<end], as: UTF8.self)
        if bytes[end] == UInt8(ascii: "=") {
            let stop = bytes[(end + 1)...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            fields[name] = String(decoding: bytes[(end + 1)..<stop], as: UTF8.self)
            index = stop + 1
        } else {
            var length = 0
            for byte in bytes[(end + 1)..<(end + 9)].reversed() { length = length << 8 | Int(byte) }
            let start = end + 9
            fields[name] = String(decoding: bytes[start..<(start + length)], as: UTF8.self)
            index = start + length + 1
        }
    }
    return fields
}

/// journald and systemd that do not read must never block the daemon (issue 10, item 8).
@Suite(.serialized) struct JournalSocketTests {
    private func logger(_ socket: JournalSocket) -> Logger {
        Logger(label: "vigild.test") { label in
            JournalLogHandler(label: label, identifier: "vigild", levelControl: LogLevelControl(.info), socket: socket)
        }
    }

    @Test func speaksTheNativeProtocolWithEveryField() throws {
        let peer = try StalledPeer()
        logger(JournalSocket(path: peer.path)).warning(
            "line one\nline two",
            metadata: ["MESSAGE_ID": "61ece635e54942e1b9c1dd26c92678c0", "vigil-generation": "2"]
        )
        let datagram = try #require(peer.receive())
        let fields = nativeFields(datagram)
        #expect(fields["MESSAGE"] == "line one\nline two")
        #expect(fields["PRIORITY"] == "4")
        #expect(fields["SYSLOG_IDENTIFIER"] == "vigild")
        #expect(fields["MESSAGE_ID"] == "61ece635e54942e1b9c1dd26c92678c0")
        #expect(fields["VIGIL_GENERATION"] == "2")
        #expect(fields["CODE_FILE"]?.hasSuffix("NonBlockingPeerTests.swift") == true)
        #expect(fields["CODE_LINE"] != nil && fields["CODE_FUNC"] != nil)
        #expect(fields["SWIFT_LOG_LABEL"] == "vigild.test")
    }

    @Test func handlerProviderAndCallMetadataAreMergedTheCallWinning() throws {
        let peer = try StalledPeer()
        var handler = JournalLogHandler(
            label: "vigild.test",
            identifier: "vigild",
            levelControl: LogLevelControl(.info),
            metadataProvider: .init { ["trace": "t1", "shared": "provider"] },
            socket: JournalSocket(path: peer.path)
        )
        handler[metadataKey: "unit"] = "u"
        handler[metadataKey: "shared"] = "handler"
        Logger(label: "vigild.test") { _ in handler }.info("merged", metadata: ["shared": "call"])
        let fields = nativeFields(try #require(peer.receive()))
        #expect(fields["UNIT"] == "u" && fields["TRACE"] == "t1" && fields["SHARED"] == "call")
        #expect(fields["SHARED_2"] == nil, "one field per merged key")
    }

    @Test func aJournaldMadeAnewGetsTheNextEntry() throws {
        let peer = try StalledPeer()
        let log = logger(JournalSocket(path: peer.path))
        log.info("before")
        #expect(nativeFields(try #require(peer.receive()))["MESSAGE"] == "before")
        try peer.remake()
        log.info("after")
        #expect(nativeFields(try #require(peer.receive()))["MESSAGE"] == "after")
    }

    /// The old socket shut down but still open (a copy held elsewhere): the send fails with
    /// `EPIPE`, which is a peer gone too; the entry goes to the socket bound anew, not to stderr.
    @Test func aJournaldSocketShutDownButHeldGetsTheNextEntryToTheNewOne() throws {
        let peer = try StalledPeer()
        let log = logger(JournalSocket(path: peer.path))
        log.info("before")
        #expect(nativeFields(try #require(peer.receive()))["MESSAGE"] == "before")
        let old = try peer.remakeKeepingTheOldShutDown()
        defer { close(old) }
        log.info("after")
        #expect(nativeFields(try #require(peer.receive(seconds: 2)))["MESSAGE"] == "after")
    }

    @Test func aSocketBoundAnewWhileTheOldIsHeldGetsEntriesOnceTheOldQueueFills() throws {
        let peer = try StalledPeer()
        let log = logger(JournalSocket(path: peer.path))
        log.info("before")
        #expect(nativeFields(try #require(peer.receive()))["MESSAGE"] == "before")
        let old = try peer.replaceKeepingTheOldOpen()
        defer { close(old) }
        // The old socket's queue (net.unix.max_dgram_qlen: 512 by default, 10 in some
        // containers) fills first; the entry that finds it full goes to the new socket, and so
        // does every entry after it. The new one is read as the entries come.
        var received: [String?] = []
        for index in 0..<2_000 {
            log.info("entry \(index)")
            if index % 4 == 3 { received += peer.drain().map { nativeFields($0)["MESSAGE"] } }
        }
        received += peer.drain().map { nativeFields($0)["MESSAGE"] }
        let first = try #require(received.first.flatMap { $0 }, "entries reach the new socket")
        let start = try #require(Int(first.dropFirst("entry ".count)))
        #expect(start > 0, "entries before the old queue filled went to it")
        #expect(received == (start..<2_000).map { "entry \($0)" }, "every entry from the first on, none lost")
    }

    @Test func keysInJournaldsFormStillYieldToReservedAndEarlierNames() throws {
        let peer = try StalledPeer()
        logger(JournalSocket(path: peer.path)).info(
            "names",
            metadata: ["MESSAGE": "m", "MESSAGE_2": "m2", "a-b": "x", "A_B": "y", "Z": ["k": "v"], "Z_K": "w"]
        )
        let datagram = try #require(peer.receive())
        let text = String(decoding: datagram, as: UTF8.self)
        let fields = nativeFields(datagram)
        #expect(fields["MESSAGE"] == "names")
        // Sorted by key: "A_B" < "MESSAGE" < "MESSAGE_2" < "Z" < "Z_K" < "a-b".
        #expect(fields["A_B"] == "y" && fields["A_B_2"] == "x")
        #expect(fields["MESSAGE_2"] == "m" && fields["MESSAGE_2_2"] == "m2")
        #expect(fields["Z_K"] == "v" && fields["Z_K_2"] == "w")
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("MESSAGE=") }.count == 1)
    }

    @Test func aFullQueueDropsCountsAndReportsOnceItDrains() throws {
        let peer = try StalledPeer()
        let socket = JournalSocket(path: peer.path)
        let log = logger(socket)
        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<2_000 { log.info("entry \(index)") }
        #expect(clock.now - start < .seconds(20), "2,000 entries into a stalled journal never block")
        let queued = peer.drain()
        #expect(!queued.isEmpty)
        #expect(socket.droppedCount == 2_000 - queued.count)
        #expect(socket.droppedCount > 0)

        log.info("after the drain")
        let reportDatagram = try #require(peer.receive())
        let report = nativeFields(reportDatagram)
        #expect(report["MESSAGE_ID"] == JournalSocket.droppedEntriesMessageID)
        #expect(report["VIGIL_DROPPED_ENTRIES"] == "\(2_000 - queued.count)")
        #expect(report["MESSAGE"]?.hasPrefix("\(2_000 - queued.count) journal entries dropped") == true)
        #expect(report["PRIORITY"] == "4")
        let after = try #require(peer.receive())
        #expect(nativeFields(after)["MESSAGE"] == "after the drain")
        #expect(socket.droppedCount == 0)
    }

    @Test func aHugeValueIsCutOnACharacterBoundary() throws {
        let peer = try StalledPeer()
        logger(JournalSocket(path: peer.path)).info("\(String(repeating: "é", count: 100_000))")
        let datagram = try #require(peer.receive())
        let message = try #require(nativeFields(datagram)["MESSAGE"])
        #expect(message.utf8.count < JournalSocket.maximumValueBytes + 40)
        #expect(message.hasSuffix("… [\(200_000 - JournalSocket.maximumValueBytes) bytes cut]"))
        #expect(message.hasPrefix(String(repeating: "é", count: 1_000)))
    }
}

/// In ``NotifierTests``: the notifier runs in a ``NotifyProbe`` child, whose `NOTIFY_SOCKET`
/// names the stalled peer.
extension NotifierTests {
    /// `"burst backlog=B ms=M"` as (B, M).
    private static func burst(_ report: String) throws -> (backlog: Int, milliseconds: Int64) {
        let fields = report.split(separator: " ")
        try #require(fields.count == 3 && fields[0] == "burst", "unexpected report '\(report)'")
        let backlog = try #require(Int(fields[1].dropFirst("backlog=".count)), "'\(report)'")
        let milliseconds = try #require(Int64(fields[2].dropFirst("ms=".count)), "'\(report)'")
        return (backlog, milliseconds)
    }

    @Test func aStalledManagerNeverBlocksAndGetsEveryNotificationInOrder() async throws {
        let peer = try StalledPeer()
        let probe = try NotifyProbe(["burst=100", "send=READY=1", "drain"], environment: ["NOTIFY_SOCKET": peer.path])
        let reports = try await probe.reports(2)
        let burst = try Self.burst(reports[0])
        #expect(burst.milliseconds < 5_000, "a stalled systemd never blocks the sender")
        #expect(burst.backlog > 0, "the queue (max_dgram_qlen) filled up")
        #expect(reports[1] == "sent")
        var received: [String] = []
        while received.count < 101, let datagram = peer.receive() {
            received.append(String(decoding: datagram, as: UTF8.self))
        }
        #expect(received == (0..<100).map { "STATUS=\($0)" } + ["READY=1"])
        let drain = try await probe.reports(3).last
        #expect(drain == "drained", "the probe's queue: \(drain ?? "no report")")
        #expect(try await probe.process.waitForExit() == 0)
    }

    /// Before: past 256 waiting datagrams the newest were dropped, so a reload storm under a
    /// stalled manager could end on RELOADING=1 and the unit stay "reloading". Now the oldest
    /// waiting ones go: whatever is lost, the last notification arrives, after the others.
    @Test func aFullBacklogKeepsTheNewestNotification() async throws {
        let queueLength =
            Int(TextFile.read("/proc/sys/net/unix/max_dgram_qlen")?.split(separator: "\n").first ?? "") ?? 512
        let count = queueLength + 256 + 400
        let peer = try StalledPeer()
        let probe = try NotifyProbe(
            ["burst=\(count)", "send=READY=1", "drain"],
            environment: ["NOTIFY_SOCKET": peer.path]
        )
        _ = try await probe.reports(2)
        var received: [String] = []
        while received.last != "READY=1", let datagram = peer.receive() {
            received.append(String(decoding: datagram, as: UTF8.self))
        }
        #expect(received.last == "READY=1", "the newest notification arrives")
        #expect(received.count < count + 1, "some were dropped: \(received.count)")
        let numbers = received.dropLast().compactMap { Int($0.dropFirst("STATUS=".count)) }
        #expect(numbers.count == received.count - 1 && numbers == numbers.sorted(), "in order")
        #expect(numbers.first == 0, "the first sent arrives too")
        let drain = try await probe.reports(3).last
        #expect(drain == "drained", "the probe's queue: \(drain ?? "no report")")
        #expect(try await probe.process.waitForExit() == 0)
    }

    /// `FDSTORE=1` behind a full queue waits in order with a duplicate of the descriptor, so
    /// the caller neither blocks (`sd_pid_notify_with_fds` would, in a blocking `sendmsg`) nor
    /// has to keep the socket open until systemd takes it.
    @Test func aStoreBehindAStalledManagerNeverBlocksAndKeepsItsDescriptor() async throws {
        let peer = try StalledPeer()
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        let stored = try #require(FakeNotifySocket.Datagram.PassedDescriptor(of: socket.fileDescriptor))
        let probe = try NotifyProbe(
            ["burst=100", "store=web", "send=READY=1", "drain"],
            environment: ["NOTIFY_SOCKET": peer.path],
            listenFileDescriptors: [(fileDescriptor: socket.fileDescriptor, name: "web")]
        )
        // The probe closes its socket after the store: from here only the queued duplicate
        // keeps the socket alive until it is sent.
        socket.close()
        let reports = try await probe.reports(3)
        let burst = try Self.burst(reports[0])
        #expect(burst.milliseconds < 5_000, "a stalled systemd never blocks the sender")
        #expect(burst.backlog > 0, "the queue (max_dgram_qlen) filled up")
        #expect(Array(reports[1...]) == ["stored=true open=true", "sent"])
        var received: [(text: String, passed: FakeNotifySocket.Datagram.PassedDescriptor?)] = []
        while received.count < 102, let datagram = peer.receiveWithDescriptor() { received.append(datagram) }
        #expect(received.map(\.text) == (0..<100).map { "STATUS=\($0)" } + ["FDSTORE=1\nFDNAME=web", "READY=1"])
        #expect(received.count == 102 && received[100].passed == stored)
        #expect(received.enumerated().allSatisfy { $0.offset == 100 || $0.element.passed == nil })
        let drain = try await probe.reports(4).last
        #expect(drain == "drained", "the probe's queue: \(drain ?? "no report")")
        #expect(try await probe.process.waitForExit() == 0)
    }

    /// Before: with no thread to be had (`RLIMIT_NPROC` reached), the notifier sent in place
    /// with a blocking `sendmsg`, which waited in `unix_wait_for_peer` for as long as systemd
    /// did not read: the burst never returned (and vigild ignored SIGTERM). Now the datagrams
    /// wait in the queue, one line says why, and later notifications move it without blocking.
    /// The probe runs as nobody with `RLIMIT_NPROC` 1 (root is exempt from that limit).
    @Test func noThreadToBeHadNeverBlocksAndKeepsTheNotificationsInOrder() async throws {
        let queueLength =
            Int(TextFile.read("/proc/sys/net/unix/max_dgram_qlen")?.split(separator: "\n").first ?? "") ?? 512
        let count = queueLength + 20
        let peer = try StalledPeer()
        let output = "/tmp/vigil-notify-nothread-\(getpid()).log"
        unlink(output)
        defer { unlink(output) }
        // nobody must reach both sockets.
        let reachable = { (path: String) in
            chmod(String(path[..<path.lastIndex(of: "/")!]), 0o755)
            chmod(path, 0o777)
        }
        reachable(peer.path)
        let probe = try NotifyProbe(
            ["burst=\(count)", "send=READY=1", "ping-drain"],
            environment: ["NOTIFY_SOCKET": peer.path],
            executable: "/usr/bin/setpriv",
            arguments: [
                "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/prlimit", "--nproc=1", "--",
                NotifyProbe.path,
            ],
            outputPath: output,
            beforeSpawn: { reachable($0.path) }
        )
        let reports = try await probe.reports(2)
        let burst = try Self.burst(reports[0])
        #expect(burst.milliseconds < 5_000, "no thread, and still no blocking send")
        #expect(burst.backlog > 0, "the queue (max_dgram_qlen) filled up and the rest waits")
        #expect(reports[1] == "sent")
        var received: [String] = []
        while received.last != "READY=1", let datagram = peer.receive() {
            received.append(String(decoding: datagram, as: UTF8.self))
        }
        #expect(received == (0..<count).map { "STATUS=\($0)" } + ["READY=1"], "all of them, in order")
        let end = try await probe.reports(4)
        #expect(Array(end[2...]) == ["drained", "dropped=0"])
        #expect(try await probe.process.waitForExit() == 0)
        let said = TextFile.read(output) ?? ""
        #expect(
            said.split(separator: "\n").filter { $0.contains("Cannot start the thread that sends") }.count == 1,
            "said once: \(said)"
        )
        #expect(said.contains("RLIMIT_NPROC"))
    }

    @Test func anAbstractSocketAddressIsHonoured() async throws {
        let name = "vigil-test-notify-\(getpid())"
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in name.utf8.enumerated() { raw[index + 1] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.utf8.count)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        try #require(bound == 0)
        let reports = try await NotifyProbe.run(
            ["send=READY=1", "env=NOTIFY_SOCKET"],
            environment: ["NOTIFY_SOCKET": "@" + name]
        )
        #expect(reports == ["sent", "NOTIFY_SOCKET=@" + name], "sent, and never unset")
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        #expect(count == 7 && String(decoding: buffer[0..<7], as: UTF8.self) == "READY=1")
    }
}

@Suite struct StderrEscapingTests {
    @Test func aMessageCannotForgeALineOrAPriority() {
        let line = StderrLogHandler.line(
            format: .syslogPrefixed,
            label: "vigild",
            level: .info,
            message: "x\n<0>sshd[1]: FORGED\r\u{1B}[2J\u{85}",
            metadata: ["reason": "a\nb"],
            time: ""
        )
        #expect(line == #"<6>x\n<0>sshd[1]: FORGED\r\x1B[2J\u{85} reason=a\nb"#)
        #expect(!line.contains { $0.isNewline })
    }
}
