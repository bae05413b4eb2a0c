import Testing
import VigilPOSIX
import VigilPlatform

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
}
