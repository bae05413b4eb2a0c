#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// What both benchmark executables need and the library does not offer publicly (its own
// socket helper is a `package` symbol of VigilTesting).

/// `CLOCK_MONOTONIC` in nanoseconds.
package enum Monotonic {
    package static func now() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Nanoseconds that `body` took.
    package static func time(_ body: () -> Void) -> UInt64 {
        let began = now()
        body()
        return now() - began
    }
}

package struct BenchmarkError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// A datagram socket bound at `path` (systemd's end of `NOTIFY_SOCKET`, or journald's).
package func boundDatagramSocket(path: String) throws -> Int32 {
    unlink(path)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        throw BenchmarkError(
            "the socket path \(path) is longer than \(MemoryLayout.size(ofValue: address.sun_path) - 1) bytes"
        )
    }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw BenchmarkError("cannot create a datagram socket for \(path): errno \(errno)") }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard bound == 0 else {
        let error = errno
        close(fd)
        throw BenchmarkError(
            "cannot bind \(path): errno \(error) (the benchmarks run as root in a private mount namespace with a "
                + "tmpfs on /run: use Benchmarks/run.sh or Benchmarks/in-process.sh)"
        )
    }
    return fd
}
