import VigilPlatform

/// An `AF_UNIX` socket address: a path, or `@name` in Linux's abstract namespace (as
/// `NOTIFY_SOCKET` and `ListenStream=` spell it). The one place that builds and reads a
/// `sockaddr_un`.
@usableFromInline
package struct UnixSocketAddress: @unchecked Sendable {
    /// The address as given: `/run/systemd/notify`, `@vigil-test`.
    package let text: String
    @usableFromInline
    var storage = sockaddr_un()
    /// `sun_path`'s offset plus the bytes used: a path's terminating NUL counts, an abstract
    /// name has none.
    @usableFromInline
    package private(set) var length: socklen_t = 0

    /// How many bytes `sun_path` holds (108 on Linux): a path must be shorter by its NUL.
    package static let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)

    private static let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? MemoryLayout<sa_family_t>.size

    /// `nil` for an empty text, one with a NUL byte, or one that does not fit `sun_path` (a path
    /// needs room for its NUL; `@name` may fill it).
    package init?(_ text: String) {
        let bytes = Array(text.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        guard !bytes.isEmpty, !bytes.contains(0), bytes.count <= (abstract ? Self.capacity : Self.capacity - 1) else {
            return nil
        }
        self.text = text
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            raw.copyBytes(from: bytes)
            if abstract { raw[0] = 0 }
        }
        length = socklen_t(Self.pathOffset + bytes.count + (abstract ? 0 : 1))
    }

    /// The address the kernel wrote into `storage` (`getsockname`, `getpeername`, `accept`),
    /// `length` bytes of it; an abstract name reads `@name`, an unnamed socket "".
    package init(_ storage: sockaddr_storage, length: socklen_t) {
        var storage = storage
        let unix = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_un.self) }
        let pathLength = max(0, min(Int(length) - Self.pathOffset, Self.capacity))
        let bytes = withUnsafeBytes(of: unix.sun_path) { Array($0.prefix(pathLength)) }
        if let first = bytes.first, first == 0 {
            text = "@" + String(decoding: bytes.dropFirst(), as: UTF8.self)
        } else {
            text = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        self.storage = unix
        self.length = length
    }

    /// Whether it names Linux's abstract namespace (`@name`), where no file is made.
    package var isAbstract: Bool { text.hasPrefix("@") }

    /// `body` with the address as the C calls take it. Inlinable, so that a send specializes it
    /// and copies no generic value (it was most of the cost of a notify send).
    @inlinable
    package func withSocketAddress<Result>(
        _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> Result
    ) rethrows -> Result {
        var storage = storage
        return try withUnsafePointer(to: &storage) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, length) }
        }
    }

}

/// An open descriptor that closes when it goes: one owner, no copies, so no descriptor is
/// closed twice or forgotten on an error path. ``take()`` hands the number on to a new owner.
package struct FileDescriptor: ~Copyable {
    package let rawValue: Int32

    /// Takes ownership of `rawValue`, which must be open.
    package init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// `open(2)`, `EINTR` retried, always with `O_CLOEXEC`.
    ///
    /// - Throws: ``SystemError`` with `operation` (`open`, `read`) and the errno.
    package init(
        opening path: String,
        _ flags: Int32,
        mode: mode_t = 0,
        operation: String = "open"
    )
        throws(SystemError)
    {
        let descriptor = SystemCall.open(path, flags | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw SystemError(path: path, operation: operation, errno: errno) }
        rawValue = descriptor
    }

    /// The number, which the caller now owns and must close.
    package consuming func take() -> Int32 {
        let value = rawValue
        discard self
        return value
    }

    deinit { SystemCall.close(rawValue) }
}
