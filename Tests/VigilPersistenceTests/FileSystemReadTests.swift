import Testing
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// `FileSystem.readAll` reads into a buffer sized from `fstat`: these pin what it returns when
/// the size it was given is wrong (a file that grew or shrank after `fstat`, a pipe) and where
/// the limit cuts.
@Suite struct FileSystemReadTests {
    /// A pipe holding `bytes`, its write end closed; returns the read end.
    private func pipeHolding(_ bytes: [UInt8]) throws -> Int32 {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        let written = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        close(ends[1])
        try #require(written == bytes.count)
        return ends[0]
    }

    private let content = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    /// A sysctl file reports size 0 and answers only the first read: read a byte at a time, it
    /// gave "6" for "65534\n" (the state directory's check of a user namespace misread the
    /// overflow uid so). Its whole text comes in one read now.
    @Test func aSysctlFileIsReadWhole() throws {
        let text = String(decoding: try FileSystem.read("/proc/sys/kernel/pid_max", limit: 64), as: UTF8.self)
        #expect(text.hasSuffix("\n") && Int(text.dropLast()).map { $0 >= 301 } == true, "\(text)")
    }

    @Test(arguments: [0, 1, 100, 49_999, 50_000, 50_001, 1 << 20])
    func returnsEveryByteWhateverSizeItWasTold(expected: Int) throws {
        let descriptor = try pipeHolding(content)
        defer { close(descriptor) }
        let result = FileSystem.readAll(descriptor, limit: 60_000, expected: Int64(expected))
        guard case .success(let bytes) = result else {
            Issue.record("read failed: \(result)")
            return
        }
        #expect(bytes == content)
    }

    @Test func anEmptyInputIsEmpty() throws {
        let descriptor = try pipeHolding([])
        defer { close(descriptor) }
        guard case .success(let bytes) = FileSystem.readAll(descriptor, limit: 10, expected: 5) else {
            Issue.record("read failed")
            return
        }
        #expect(bytes.isEmpty)
    }

    @Test(arguments: [0, 10, 49_999, 50_000])
    func oneByteOverTheLimitIsTooLarge(expected: Int) throws {
        let descriptor = try pipeHolding(content)
        defer { close(descriptor) }
        let result = FileSystem.readAll(descriptor, limit: content.count - 1, expected: Int64(expected))
        guard case .failure(.tooLarge) = result else {
            Issue.record("expected tooLarge, got \(result)")
            return
        }
    }

    @Test func exactlyTheLimitIsRead() throws {
        let descriptor = try pipeHolding(content)
        defer { close(descriptor) }
        guard case .success(let bytes) = FileSystem.readAll(descriptor, limit: content.count, expected: 0) else {
            Issue.record("read failed")
            return
        }
        #expect(bytes == content)
    }

    /// A read that stops short exactly at the size it was told is not taken for the end: a file
    /// served in pieces (FUSE with `direct_io`, whose `st_size` may be stale) can give the rest
    /// on the next read, so reading goes on until `read` returns 0 (a shortcut that stopped there
    /// refused a whole configuration as cut JSON). Here a pipe gives the first 20 bytes, and the
    /// rest only once they were read.
    @Test func aReadThatStopsAtTheToldSizeReadsOnToTheEnd() async throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { close(readEnd) }
        let (first, rest) = (Array(content[..<20]), Array(content[20..<53]))
        try #require(first.withUnsafeBytes { write(writeEnd, $0.baseAddress, $0.count) } == 20)
        async let result = withCheckedContinuation { answer in
            DetachedThread.run { answer.resume(returning: FileSystem.readAll(readEnd, limit: 100, expected: 20)) }
        }
        try await poll(until: "the first piece was read") {
            var waiting = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            return poll(&waiting, 1, 0) == 0
        }
        try #require(rest.withUnsafeBytes { write(writeEnd, $0.baseAddress, $0.count) } == 33)
        close(writeEnd)
        guard case .success(let bytes) = await result else {
            Issue.record("read failed")
            return
        }
        #expect(bytes == first + rest)
    }
}
