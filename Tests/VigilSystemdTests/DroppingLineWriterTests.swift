import Testing
import VigilPlatform
import VigilSystemd

/// Log lines to a pipe or terminal that stopped taking them are dropped and counted, never
/// waited for (a full FIFO on stderr held vigild's only thread: no answer to a reload or a
/// stop, a helper's attack); the next line that goes through follows the count.
@Suite struct DroppingLineWriterTests {
    /// A pipe of one page whose write end does not block, and a way to read what it holds.
    struct Pipe: ~Copyable {
        let readEnd: Int32
        let writeEnd: Int32

        init() throws {
            var ends: [Int32] = [-1, -1]
            try #require(pipe(&ends) == 0)
            (readEnd, writeEnd) = (ends[0], ends[1])
            for end in ends { _ = fcntl(end, F_SETFL, O_NONBLOCK) }
            _ = fcntl(writeEnd, 1031 /* F_SETPIPE_SZ */, 4096)
        }

        deinit {
            close(readEnd)
            close(writeEnd)
        }

        /// Fills the pipe with `x`s until it takes no more.
        func fill() {
            let page = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
            while write(writeEnd, page, page.count) > 0 {}
        }

        /// Everything the pipe holds.
        func drain() -> [UInt8] {
            var all: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                if count <= 0 { return all }
                all += buffer[..<count]
            }
        }
    }

    static func notice(_ count: Int) -> [UInt8] { Array("dropped \(count)\n".utf8) }

    /// The write end blocks (as a daemon's stderr does): a write the check let through to a full
    /// pipe would hang this test, not fail it quietly.
    @Test func linesAFullPipeCannotTakeAreCountedAndTheNextWriteReportsThem() throws {
        let pipe = try Pipe()
        var writer = DroppingLineWriter()
        pipe.fill()
        _ = fcntl(pipe.writeEnd, F_SETFL, 0)
        writer.write(Array("a\n".utf8), to: pipe.writeEnd, checkingFirst: true, notice: Self.notice)
        writer.write(Array("b\nc\n".utf8), to: pipe.writeEnd, checkingFirst: true, notice: Self.notice)
        #expect(writer.dropped == 3)
        #expect(pipe.drain().allSatisfy { $0 == UInt8(ascii: "x") })
        writer.write(Array("d\n".utf8), to: pipe.writeEnd, checkingFirst: true, notice: Self.notice)
        #expect(writer.dropped == 0)
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "dropped 3\nd\n")
    }
}
