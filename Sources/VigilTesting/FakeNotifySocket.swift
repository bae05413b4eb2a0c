@preconcurrency import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A real `AF_UNIX` datagram socket in a temporary directory that stands in for systemd's
/// `NOTIFY_SOCKET`: it records each datagram's exact text and the sender's pid (from
/// `SCM_CREDENTIALS`, as systemd checks it).
///
/// Give ``path`` to a child process as `NOTIFY_SOCKET`, or set it in this process's environment
/// (serialised tests only).
public final class FakeNotifySocket: Sendable {
    /// One datagram as received.
    public struct Datagram: Sendable, Hashable, CustomStringConvertible {
        /// The text, e.g. `READY=1\nSTATUS=Running`.
        public var text: String
        /// The sending process.
        public var senderPID: Int32
        /// `CLOCK_MONOTONIC` at receipt, in µs.
        public var receivedAt: UInt64

        /// The assignments, one per line.
        public var lines: [String] { text.split(separator: "\n").map(String.init) }

        /// The value of `NAME=` in this datagram, if present.
        public func value(_ name: String) -> String? {
            lines.first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
        }

        public var description: String { "[\(senderPID)] \(text.replacing("\n", with: "\\n"))" }
    }

    /// The socket's path, for `NOTIFY_SOCKET`.
    public let path: String
    /// Every datagram received so far.
    public let datagrams = AsyncRecorder<Datagram>()
    private let directory: String
    private let descriptor: Int32
    private let done = DispatchSemaphore(value: 0)

    /// Binds a socket in a fresh temporary directory and starts receiving.
    public init() throws {
        var template = Array("/tmp/vigil-notify-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw SystemCallError("mkdtemp", errno) }
        directory = String(cString: created)
        path = directory + "/notify.sock"
        let descriptor = try UnixDatagramSocket.bind(path: path)
        self.descriptor = descriptor
        var on: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
        let datagrams = self.datagrams
        let done = self.done
        DetachedThread.run {
            Self.receive(descriptor, into: datagrams)
            done.signal()
        }
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        done.wait()
        close(descriptor)
        unlink(path)
        rmdir(directory)
    }

    private static func receive(_ descriptor: Int32, into datagrams: AsyncRecorder<Datagram>) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var control = [UInt8](repeating: 0, count: 256)
        while true {
            let (received, sender) = buffer.withUnsafeMutableBytes { data in
                control.withUnsafeMutableBytes { controlBytes -> (Int, Int32) in
                    var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBytes.baseAddress
                        message.msg_controllen = controlBytes.count
                        let count = recvmsg(descriptor, &message, 0)
                        return (count, count > 0 ? senderPID(&message) : 0)
                    }
                }
            }
            if received < 0 && errno == EINTR { continue }
            guard received > 0 else { return }
            let text = String(decoding: buffer[0..<received], as: UTF8.self)
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let micros = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            datagrams.append(Datagram(text: text, senderPID: sender, receivedAt: micros))
        }
    }

    /// `SCM_CREDENTIALS` on Linux; Glibc's module hides it behind `_GNU_SOURCE`.
    private static let scmCredentials: Int32 = 2

    private static func senderPID(_ message: inout msghdr) -> Int32 {
        guard message.msg_controllen >= MemoryLayout<cmsghdr>.size, let control = message.msg_control else { return 0 }
        let header = control.load(as: cmsghdr.self)
        guard header.cmsg_level == SOL_SOCKET, header.cmsg_type == scmCredentials else { return 0 }
        let dataOffset = (MemoryLayout<cmsghdr>.size + MemoryLayout<Int>.size - 1) & ~(MemoryLayout<Int>.size - 1)
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: the pid comes first.
        return control.load(fromByteOffset: dataOffset, as: Int32.self)
    }
}

/// A system call the test kit made failed (setting up a socket, spawning a process).
public struct SystemCallError: Error, CustomStringConvertible {
    public let description: String
    package init(_ call: String, _ code: Int32) {
        description = "\(call) failed: \(String(cString: strerror(code)))"
    }
}

/// An `AF_UNIX` datagram socket bound to a path: what systemd's notify and journal sockets are.
package enum UnixDatagramSocket {
    /// A new close-on-exec socket bound to `path`; the caller closes it.
    package static func bind(path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemCallError("socket", errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(descriptor)
            throw SystemCallError("bind \(path)", code)
        }
        return descriptor
    }
}
