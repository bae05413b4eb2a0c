@preconcurrency import Dispatch
import Synchronization
import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// A real `AF_UNIX` datagram socket in a temporary directory that stands in for systemd's
/// `NOTIFY_SOCKET`: it records each datagram's exact text, the sender's pid (from
/// `SCM_CREDENTIALS`, as systemd checks it) and the identity of each descriptor passed with it
/// (`SCM_RIGHTS`, as `FDSTORE=1` sends them).
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
        /// When it reached the socket, in µs of `CLOCK_MONOTONIC`: the kernel's stamp
        /// (`SO_TIMESTAMPNS`), not when the receiving thread woke up, so that a test runner
        /// slowed by load does not move it (a reader that woke 100 ms late stamped `READY=1`
        /// 100 ms late, and a test measured the pings after it as early).
        public var receivedAt: UInt64
        /// The descriptors that came with it (`SCM_RIGHTS`), in order; the fake closes them once
        /// the datagram is recorded (a `BARRIER=1`'s only if it ``init(answersBarriers:)``).
        public var passedDescriptors: [PassedDescriptor] = []

        /// What a passed descriptor referred to: compare with `fstat` of the sender's.
        public struct PassedDescriptor: Sendable, Hashable {
            /// `st_dev`.
            public var device: UInt64
            /// `st_ino`.
            public var inode: UInt64

            /// What `descriptor` in this process refers to; `nil` when it is not open.
            public init?(of descriptor: Int32) {
                var info = stat()
                guard fstat(descriptor, &info) == 0 else { return nil }
                device = UInt64(info.st_dev)
                inode = UInt64(info.st_ino)
            }
        }

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
    /// What ``descriptor`` referred to when it was bound, checked before it is shut down.
    private let identity: Datagram.PassedDescriptor?
    private let done = DispatchSemaphore(value: 0)
    private let control: Control

    /// The receiving thread's switches: paused or not, and the barrier descriptors it holds.
    private final class Control: Sendable {
        struct State {
            var paused = false
            var held: [Int32] = []
        }
        let answersBarriers: Bool
        let state = Mutex(State())
        let resumed = DispatchSemaphore(value: 0)

        init(answersBarriers: Bool) { self.answersBarriers = answersBarriers }

        /// Blocks the receiving thread while paused.
        func waitWhilePaused() {
            while state.withLock({ $0.paused }) { resumed.wait() }
        }
    }

    /// Binds a socket in a fresh temporary directory and starts receiving.
    ///
    /// - Parameter answersBarriers: `false` keeps the descriptor of each `BARRIER=1` open until
    ///   the fake is gone, as a frozen service manager would: the sender's barrier never hears
    ///   the hang-up. `true` (the default) closes it at once, as systemd does once it has
    ///   handled the datagram.
    public init(answersBarriers: Bool = true) throws {
        control = Control(answersBarriers: answersBarriers)
        var template = Array("/tmp/vigil-notify-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw SystemCallError("mkdtemp", errno) }
        directory = String(cString: created)
        path = directory + "/notify.sock"
        let descriptor = try UnixDatagramSocket.bind(path: path)
        self.descriptor = descriptor
        identity = Datagram.PassedDescriptor(of: descriptor)
        var on: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_TIMESTAMPNS, &on, socklen_t(MemoryLayout<Int32>.size))
        let datagrams = self.datagrams
        let done = self.done
        let control = self.control
        DetachedThread.run {
            Self.receive(descriptor, into: datagrams, control: control)
            done.signal()
        }
    }

    /// The socket's descriptor (the test kit's own tests).
    package var descriptorForTests: Int32 { descriptor }

    /// Stops taking datagrams, as a frozen manager does: once the receiving thread has taken the
    /// one it may be waiting for, the rest stay in the socket's queue (and the sender's queue
    /// fills) until ``resume()``.
    public func pause() { control.state.withLock { $0.paused = true } }

    /// Takes datagrams again after ``pause()``.
    public func resume() {
        control.state.withLock { $0.paused = false }
        control.resumed.signal()
    }

    deinit {
        // Still this fake's socket? If something else in the process closed the descriptor and
        // its number was reused, a shutdown here would cut off whoever holds it now (another
        // fake's socket, whose sender then fails with EPIPE): say so loudly and leave it.
        guard Datagram.PassedDescriptor(of: descriptor) == identity else {
            let warning =
                "FakeNotifySocket \(path): descriptor \(descriptor) is no longer this socket (closed elsewhere, "
                + "its number reused?): left alone, and its receiving thread with it\n"
            _ = Array(warning.utf8).withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            unlink(path)
            rmdir(directory)
            return
        }
        resume()
        shutdown(descriptor, Int32(SHUT_RDWR))
        done.wait()
        for held in control.state.withLock({ $0.held }) { close(held) }
        close(descriptor)
        unlink(path)
        rmdir(directory)
    }

    private static func receive(_ descriptor: Int32, into datagrams: AsyncRecorder<Datagram>, control switches: Control)
    {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var control = [UInt8](repeating: 0, count: 256)
        while true {
            switches.waitWhilePaused()
            // The passed descriptors are closed only once the datagram is recorded: a sender whose
            // barrier was answered finds everything it sent in `datagrams`.
            var taken: [Int32] = []
            let received = receiveDatagram(descriptor, into: &buffer, control: &control) { passed in
                taken.append(passed)
                return true
            }
            guard received.count > 0 else { return }
            let text = String(decoding: buffer[0..<received.count], as: UTF8.self)
            defer {
                if !switches.answersBarriers && text == "BARRIER=1" {
                    switches.state.withLock { $0.held += taken }
                } else {
                    for passed in taken { close(passed) }
                }
            }
            datagrams.append(
                Datagram(
                    text: text,
                    senderPID: received.senderPID,
                    receivedAt: Self.monotonic(fromRealtime: received.arrivedAt),
                    passedDescriptors: received.passed
                )
            )
        }
    }

    /// One `recvmsg` of `descriptor` into `buffer`, with `control` for its control messages: the
    /// byte count (-1 with `errno` as `recvmsg` left it), the sender's pid (`SCM_CREDENTIALS`, 0
    /// without `SO_PASSCRED`) and what the descriptors passed with it (`SCM_RIGHTS`) referred to,
    /// which are closed. For tests that read a socket of their own the way this one does.
    ///
    /// `keep`, given a passed descriptor, returns `true` to take it over instead of having it
    /// closed.
    package static func receiveDatagram(
        _ descriptor: Int32,
        into buffer: inout [UInt8],
        control: inout [UInt8],
        keep: ((Int32) -> Bool)? = nil
    ) -> (count: Int, senderPID: Int32, passed: [Datagram.PassedDescriptor], arrivedAt: UInt64?) {
        let (count, sender, controlLength) = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { controlBytes -> (Int, Int32, Int) in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    let count = SystemCall.retrying(.recv, .descriptor(descriptor)) {
                        recvmsg(descriptor, &message, Int32(MSG_CMSG_CLOEXEC))
                    }
                    return (count, count > 0 ? senderPID(&message) : 0, count > 0 ? message.msg_controllen : 0)
                }
            }
        }
        guard count > 0 else { return (count, 0, [], nil) }
        let passed = control.withUnsafeBytes {
            passedDescriptors($0, length: controlLength) { keep?($0) ?? false }
        }
        var arrivedAt: UInt64?
        control.withUnsafeBytes { bytes in
            controlMessages(bytes, length: controlLength) { level, type, data in
                // SCM_TIMESTAMPNS (SO_TIMESTAMPNS_OLD on 64-bit Linux): a timespec of CLOCK_REALTIME.
                guard level == SOL_SOCKET, type == SO_TIMESTAMPNS, data.count >= MemoryLayout<timespec>.size else {
                    return
                }
                let stamp = data.loadUnaligned(as: timespec.self)
                arrivedAt = UInt64(stamp.tv_sec) &* 1_000_000_000 &+ UInt64(stamp.tv_nsec)
            }
        }
        return (count, sender, passed, arrivedAt)
    }

    /// `SCM_CREDENTIALS` on Linux; Glibc's module hides it behind `_GNU_SOURCE`.
    private static let scmCredentials: Int32 = 2

    /// `CMSG_ALIGN`: control messages and their data are aligned to `size_t`.
    private static func aligned(_ length: Int) -> Int {
        (length + MemoryLayout<Int>.size - 1) & ~(MemoryLayout<Int>.size - 1)
    }

    /// Each control message in `control` (its first `length` bytes): level, type and data.
    private static func controlMessages(
        _ control: UnsafeRawBufferPointer,
        length: Int,
        _ body: (Int32, Int32, UnsafeRawBufferPointer) -> Void
    ) {
        let headerLength = aligned(MemoryLayout<cmsghdr>.size)
        var offset = 0
        while offset + headerLength <= min(length, control.count) {
            let header = control.loadUnaligned(fromByteOffset: offset, as: cmsghdr.self)
            let total = Int(header.cmsg_len)
            guard total >= headerLength, offset + total <= control.count else { return }
            body(
                header.cmsg_level,
                header.cmsg_type,
                UnsafeRawBufferPointer(rebasing: control[(offset + headerLength)..<(offset + total)])
            )
            offset += aligned(total)
        }
    }

    /// A `CLOCK_REALTIME` stamp in ns as `CLOCK_MONOTONIC` µs: now on the monotonic clock less
    /// how long ago it was on the real-time one (now when there is none, or it is in the future).
    private static func monotonic(fromRealtime stamp: UInt64?) -> UInt64 {
        let now = MonotonicClock.microseconds()
        var real = timespec()
        guard let stamp, clock_gettime(CLOCK_REALTIME, &real) == 0 else { return now }
        let realNow = UInt64(real.tv_sec) &* 1_000_000_000 &+ UInt64(real.tv_nsec)
        guard realNow >= stamp else { return now }
        let ago = (realNow - stamp) / 1000
        return ago < now ? now - ago : now
    }

    private static func senderPID(_ message: inout msghdr) -> Int32 {
        guard let control = message.msg_control else { return 0 }
        var pid: Int32 = 0
        controlMessages(UnsafeRawBufferPointer(start: control, count: 256), length: message.msg_controllen) {
            level,
            type,
            data in
            // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: the pid comes first.
            if level == SOL_SOCKET, type == scmCredentials, data.count >= 4 {
                pid = data.loadUnaligned(as: Int32.self)
            }
        }
        return pid
    }

    /// The identities of the descriptors passed with the last datagram; closes those `keep` does
    /// not take over.
    private static func passedDescriptors(
        _ control: UnsafeRawBufferPointer,
        length: Int,
        keep: (Int32) -> Bool
    ) -> [Datagram.PassedDescriptor] {
        var passed: [Datagram.PassedDescriptor] = []
        controlMessages(control, length: length) { level, type, data in
            guard level == SOL_SOCKET, type == Int32(SCM_RIGHTS) else { return }
            for index in 0..<(data.count / 4) {
                let descriptor = data.loadUnaligned(fromByteOffset: index * 4, as: Int32.self)
                if let identity = Datagram.PassedDescriptor(of: descriptor) { passed.append(identity) }
                if !keep(descriptor) { close(descriptor) }
            }
        }
        return passed
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
        let address = UnixSocketAddress(path)
        guard let address, SystemCall.bind(descriptor, address) == 0 else {
            let code = address == nil ? ENAMETOOLONG : errno
            close(descriptor)
            throw SystemCallError("bind \(path)", code)
        }
        return descriptor
    }
}
