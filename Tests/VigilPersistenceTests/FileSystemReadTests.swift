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

    /// A regular file whose read stops short at the size `fstat` gave is read with one `read`
    /// (the call that would return 0 is spared); told a size it does not have (a file that shrank
    /// or grew after `fstat`), the read goes on to the end and returns every byte.
    @Test(arguments: [(told: nil as Int?, reads: 1), (told: 50_010, reads: 2), (told: 49_990, reads: 3)])
    func aRegularFileEndsAtItsSize(told: Int?, reads: Int) throws {
        let directory = temporaryDirectory()
        let path = directory + "/file"
        try FileSystem.writeAtomically(content, to: path)
        let counting = SystemCall.inject(.read, .pathContaining(directory), errno: EIO, after: 1_000)
        defer { counting.remove() }
        if let told {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let result = FileSystem.readAll(descriptor, limit: 60_000, expected: Int64(told), subject: .path(path))
            guard case .success(let bytes) = result else {
                Issue.record("read failed: \(result)")
                return
            }
            #expect(bytes == content)
        } else {
            #expect(try FileSystem.read(path) == content)
        }
        #expect(counting.seen == reads, "read calls")
        #expect(counting.injected == 0)
    }
}
