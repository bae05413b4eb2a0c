import Glibc
import Testing
import VigilSystemd
import VigilTesting

/// `$MEMORY_PRESSURE_WATCH` as `docs/PRESSURE.md` defines it, against real FIFOs, files and
/// sockets (the event loop's path is exercised by vigild's process test).
@Suite struct MemoryPressureWatchTests {
    /// `some 200000 2000000` and its NUL, as systemd 254 encodes it.
    static let trigger = Array("some 200000 2000000".utf8) + [0]
    static let triggerBase64 = "c29tZSAyMDAwMDAgMjAwMDAwMAA="

    @Test func offWhenUnsetEmptyOrDevNull() throws {
        for watch in [nil, "", "/dev/null"] {
            #expect(try MemoryPressureWatch(watch: watch, write: Self.triggerBase64) {} == nil)
        }
    }

    /// A FIFO: each write is one report, its bytes read away (or the level-triggered watch would
    /// report them again and again).
    @Test func aFIFOReportsEachWriteAndIsDrained() async throws {
        let path = temporaryDirectory() + "/pressure.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        let reports = AsyncRecorder<Int>()
        let watch = try #require(try MemoryPressureWatch(watch: path, write: nil) { reports.append(1) })
        defer { watch.cancel() }
        #expect(watch.kind == .fifo)
        let writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        #expect(write(writer, "pressure", 8) == 8)
        try await reports.wait { $0.count == 1 }
        #expect(write(writer, "again", 5) == 5)
        try await reports.wait { $0.count == 2 }
        // Drained: no byte left for a reader of our own.
        var byte: UInt8 = 0
        let reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        defer { close(reader) }
        #expect(read(reader, &byte, 1) == -1 && errno == EAGAIN)
        #expect(reports.values.count == 2)
    }

    /// A FIFO gets no trigger: written, it came straight back to the daemon's own read end and
    /// was reported as pressure at start (helper 51). Kept to be named in the start's log line;
    /// the FIFO still reports what a writer sends.
    @Test func aFIFOIsNotWrittenTheTrigger() async throws {
        let path = temporaryDirectory() + "/pressure.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        let reports = AsyncRecorder<Int>()
        let watch = try #require(try MemoryPressureWatch(watch: path, write: Self.triggerBase64) { reports.append(1) })
        defer { watch.cancel() }
        #expect(watch.written.isEmpty)
        #expect(watch.unwritten == Self.trigger)
        let writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        #expect(write(writer, "pressure", 8) == 8)
        try await reports.wait { $0.count == 1 }
    }

    /// A regular file outside procfs and cgroupfs is no PSI file: refused, and the trigger is not
    /// written over its first bytes (a typo in the unit, or /etc/passwd, kept intact).
    @Test func aRegularFileElsewhereIsRefusedAndLeftUntouched() throws {
        let path = temporaryDirectory() + "/memory.pressure"
        writeFile(path, "precious data\n")
        let refused = try #require(throws: (any Error).self) {
            try MemoryPressureWatch(watch: path, write: Self.triggerBase64) {}
        }
        #expect("\(refused)".contains("it is a regular file outside /proc and the cgroup file system"), "\(refused)")
        #expect(readFile(path) == "precious data\n")
        #expect(MemoryPressureWatch.text(Self.trigger) == "some 200000 2000000")
    }

    /// A file of procfs that is not the memory PSI file is refused before anything is written to
    /// it: /proc/sysrq-trigger or /proc/sys/… would change the system (an attacker's
    /// environment); /proc/self/comm, harmless, shows the trigger was not written (a helper's
    /// finding, 2026-11-27: any regular file on procfs or cgroupfs was taken).
    @Test func aProcFileThatIsNotTheMemoryPressureFileIsRefusedAndLeftUntouched() throws {
        let path = "/proc/self/comm"
        let before = readFile(path)
        let refused = try #require(throws: (any Error).self) {
            try MemoryPressureWatch(watch: path, write: Self.triggerBase64) {}
        }
        #expect(
            "\(refused)".contains("on procfs, not /proc/pressure/memory or a cgroup's memory.pressure"),
            "\(refused)"
        )
        #expect("\(refused)".contains("it was left untouched"), "\(refused)")
        #expect(readFile(path) == before)
        #expect(before != nil)
    }

    /// A stream socket: connected, the trigger written to it, each message a report; the peer
    /// closing ends the watch (no report for it).
    @Test func aSocketIsConnectedToAndItsMessagesReported() async throws {
        let path = temporaryDirectory() + "/pressure.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(listener, 1) == 0)
        let reports = AsyncRecorder<Int>()
        let watch = try #require(try MemoryPressureWatch(watch: path, write: Self.triggerBase64) { reports.append(1) })
        defer { watch.cancel() }
        #expect(watch.kind == .socket)
        let peer = accept(listener, nil, nil)
        #expect(peer >= 0)
        var received = [UInt8](repeating: 0, count: 64)
        let count = recv(peer, &received, received.count, 0)
        #expect(Array(received.prefix(max(count, 0))) == Self.trigger)
        #expect(send(peer, "x", 1, 0) == 1)
        try await reports.wait { $0.count == 1 }
        close(peer)
        #expect(reports.values.count == 1)
    }

    @Test func whatCannotBeWatchedSaysWhy() throws {
        let directory = temporaryDirectory()
        let notBase64 = try #require(throws: (any Error).self) {
            try MemoryPressureWatch(watch: directory, write: "not base64!") {}
        }
        #expect("\(notBase64)".contains("MEMORY_PRESSURE_WRITE='not base64!'"), "\(notBase64)")
        #expect("\(notBase64)".contains("it is not Base64"), "\(notBase64)")
        let folder = try #require(throws: (any Error).self) { try MemoryPressureWatch(watch: directory, write: nil) {} }
        #expect("\(folder)".contains("it is a directory, not a PSI file, FIFO or socket"), "\(folder)")
        let missing = try #require(throws: (any Error).self) {
            try MemoryPressureWatch(watch: directory + "/none", write: nil) {}
        }
        #expect("\(missing)".hasSuffix("No such file or directory"), "\(missing)")
        let relative = try #require(throws: (any Error).self) { try MemoryPressureWatch(watch: "run/x", write: nil) {} }
        #expect("\(relative)".contains("not an absolute path"), "\(relative)")
    }

    /// The kernel's own PSI file takes the trigger (root, or a window that is a multiple of 2 s
    /// on Linux 6.5 and later) and refuses a malformed one with a message naming it.
    @Test(.enabled(if: access("/proc/pressure/memory", W_OK) == 0, "needs a writable /proc/pressure/memory"))
    func aRealPSITriggerIsAcceptedAndABadOneRefused() throws {
        let watch = try #require(try MemoryPressureWatch(watch: "/proc/pressure/memory", write: Self.triggerBase64) {})
        #expect(watch.kind == .pressureFile)
        #expect(watch.written == Self.trigger)
        watch.cancel()
        let bad = "c29tZSAxIDI="  // "some 1 2": a window under 500 ms
        let refused = try #require(throws: (any Error).self) {
            try MemoryPressureWatch(watch: "/proc/pressure/memory", write: bad) {}
        }
        #expect("\(refused)".contains("the kernel refused the trigger (some 1 2)"), "\(refused)")
    }
}
