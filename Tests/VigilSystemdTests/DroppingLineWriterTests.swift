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

    @Test func linesAFullPipeCannotTakeAreCountedAndTheNextWriteReportsThem() throws {
        let pipe = try Pipe()
        var writer = DroppingLineWriter()
        pipe.fill()
        writer.write(Array("a\n".utf8), to: .nonBlocking(pipe.writeEnd), notice: Self.notice)
        writer.write(Array("b\nc\n".utf8), to: .nonBlocking(pipe.writeEnd), notice: Self.notice)
        #expect(writer.dropped == 3)
        #expect(pipe.drain().allSatisfy { $0 == UInt8(ascii: "x") })
        writer.write(Array("d\n".utf8), to: .nonBlocking(pipe.writeEnd), notice: Self.notice)
        #expect(writer.dropped == 0)
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "dropped 3\nd\n")
    }

    /// A line longer than a pipe takes whole is cut to 4 KiB with a mark, so it goes out whole
    /// or not at all; what follows it is a line of its own.
    @Test func aLongLineIsCutToWhatAPipeTakesWhole() throws {
        let pipe = try Pipe()
        var writer = DroppingLineWriter()
        let long = [UInt8](repeating: UInt8(ascii: "L"), count: 6000) + [UInt8(ascii: "\n")]
        writer.write(long, to: .nonBlocking(pipe.writeEnd), notice: Self.notice)
        #expect(writer.dropped == 0)
        let first = String(decoding: pipe.drain(), as: UTF8.self)
        #expect(first.utf8.count <= 4096)
        #expect(first.hasSuffix(" … [1969 bytes cut]\n"), "\(first.suffix(40))")
        writer.write(Array("e\n".utf8), to: .nonBlocking(pipe.writeEnd), notice: Self.notice)
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "e\n")
    }

    /// A socket that stopped taking lines (a journal stream whose reader hangs): `send` with
    /// `MSG_DONTWAIT`, dropped and counted the same way.
    @Test func aFullSocketDropsAndCountsToo() throws {
        var ends: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { ends.forEach { close($0) } }
        var size: Int32 = 4096
        setsockopt(ends[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let page = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        while send(ends[0], page, page.count, Int32(MSG_DONTWAIT)) > 0 {}
        var writer = DroppingLineWriter()
        writer.write(Array("a\n".utf8), to: .socket(ends[0]), notice: Self.notice)
        #expect(writer.dropped == 1)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while recv(ends[1], &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        writer.write(Array("b\n".utf8), to: .socket(ends[0]), notice: Self.notice)
        let count = recv(ends[1], &buffer, buffer.count, Int32(MSG_DONTWAIT))
        #expect(count > 0 && String(decoding: buffer[..<max(count, 0)], as: UTF8.self) == "dropped 1\nb\n")
    }
}
