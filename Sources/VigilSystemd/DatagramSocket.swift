import Synchronization
import VigilPlatform

/// A close-on-exec `AF_UNIX` datagram socket that sends to one address: systemd's notify socket
/// or journald's native socket.
///
/// Sends never block unless asked to: a peer that is frozen (`SIGSTOP`) or slow fills its
/// queue, and a blocking `sendmsg` would then stall the daemon's event loop.
package final class DatagramSocket: Sendable {
    /// What became of one datagram.
    package enum Outcome: Sendable, Equatable {
        /// The kernel queued it for the peer.
        case sent
        /// The peer's queue is full (`EAGAIN`); nothing was sent.
        case wouldBlock
        /// The send failed with this errno (`ENOENT`, `ECONNREFUSED`: nobody listens;
        /// `EMSGSIZE`: too big).
        case failed(Int32)
    }

    private let descriptor: Int32
    private let address: Address

    private struct Address: @unchecked Sendable {
        var storage = sockaddr_un()
        var length: socklen_t = 0
    }

    /// Why ``init(opening:sendBuffer:)`` failed.
    package enum OpenFailure: Error, Equatable {
        /// Neither an absolute path nor `@name`, or longer than `sun_path`.
        case address
        /// `socket(2)` failed with this errno (`EMFILE`: out of descriptors).
        case socket(Int32)
    }

    /// ``init(opening:sendBuffer:)``, `nil` for either failure.
    package convenience init?(address text: String, sendBuffer: Int32? = nil) {
        do {
            try self.init(opening: text, sendBuffer: sendBuffer)
        } catch {
            return nil
        }
    }

    /// Opens a socket for `address`: an absolute path, or `@name` for Linux's abstract namespace
    /// (as `NOTIFY_SOCKET` may say).
    ///
    /// - Parameter sendBuffer: `SO_SNDBUF` to ask for, as libsystemd does for the journal (the
    ///   kernel caps it), so large entries fit one datagram.
    /// - Throws: ``OpenFailure/address`` for any other address, or one that does not fit
    ///   `sun_path`; ``OpenFailure/socket(_:)`` when no socket can be had.
    package init(opening text: String, sendBuffer: Int32? = nil) throws(OpenFailure) {
        var address = Address()
        address.storage.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(text.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@") else {
            throw .address
        }
        let capacity = MemoryLayout.size(ofValue: address.storage.sun_path)
        // A path needs its terminating NUL inside sun_path; an abstract name does not.
        guard bytes.count < capacity || (first == UInt8(ascii: "@") && bytes.count <= capacity) else {
            throw .address
        }
        if first == UInt8(ascii: "@") { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.storage.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        address.length = socklen_t(pathOffset + bytes.count + (first == UInt8(ascii: "@") ? 0 : 1))
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .socket(errno) }
        if var size = sendBuffer {
            let length = socklen_t(MemoryLayout<Int32>.size)
            // SO_SNDBUFFORCE passes the system cap for a privileged daemon; SO_SNDBUF for the rest.
            if setsockopt(descriptor, SOL_SOCKET, SO_SNDBUFFORCE, &size, length) != 0 {
                setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &size, length)
            }
        }
        self.descriptor = descriptor
        self.address = address
    }

    deinit { close(descriptor) }

    /// Sends `bytes` as one datagram. The corresponding C function is `sendto(2)` with
    /// `MSG_DONTWAIT | MSG_NOSIGNAL`, or without `MSG_DONTWAIT` when `blocking`.
    package func send(_ bytes: UnsafeRawBufferPointer, blocking: Bool = false) -> Outcome {
        let flags = Int32(MSG_NOSIGNAL) | (blocking ? 0 : Int32(MSG_DONTWAIT))
        var address = self.address
        while true {
            let result = withUnsafePointer(to: &address.storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, flags, $0, address.length)
                }
            }
            if result >= 0 { return .sent }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, ENOBUFS: return .wouldBlock
            case let code: return .failed(code)
            }
        }
    }

    /// Connects the socket to its address, so that ``sendConnected(_:)`` goes to it without the
    /// kernel looking the path up again on every datagram; returns 0, or the errno (`ENOENT`,
    /// `ECONNREFUSED`: nobody listens). Connecting again re-targets it (the peer's socket was
    /// made anew). The corresponding C function is `connect(2)`.
    package func connect() -> Int32 {
        var address = self.address
        let result = withUnsafePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                systemConnect(descriptor, $0, address.length)
            }
        }
        return result == 0 ? 0 : errno
    }

    /// Sends `bytes` as one datagram to the address ``connect()`` connected to. The
    /// corresponding C function is `send(2)` with `MSG_DONTWAIT | MSG_NOSIGNAL`.
    package func sendConnected(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        while true {
            if systemSend(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) >= 0 {
                return .sent
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, ENOBUFS: return .wouldBlock
            case let code: return .failed(code)
            }
        }
    }

    /// Sends the UTF-8 of `text` as one datagram (see ``send(_:blocking:)``).
    package func send(_ text: String, blocking: Bool = false) -> Outcome {
        var text = text
        return text.withUTF8 { send(UnsafeRawBufferPointer($0), blocking: blocking) }
    }

    /// Sends the UTF-8 of `text` as one datagram that carries a duplicate of `descriptor` to the
    /// peer (`SCM_RIGHTS`), as `sd_pid_notify_with_fds(3)` does for `FDSTORE=1`. The corresponding
    /// C function is `sendmsg(2)`; flags as in ``send(_:blocking:)``.
    package func send(_ text: String, passing descriptor: Int32, blocking: Bool = false) -> Outcome {
        let flags = Int32(MSG_NOSIGNAL) | (blocking ? 0 : Int32(MSG_DONTWAIT))
        var address = self.address
        var bytes = Array(text.utf8)
        // struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; } then the data, both
        // aligned to size_t (CMSG_LEN / CMSG_SPACE).
        let alignment = MemoryLayout<Int>.size
        let headerLength = (MemoryLayout<cmsghdr>.size + alignment - 1) & ~(alignment - 1)
        let dataLength = MemoryLayout<Int32>.size
        let space = headerLength + ((dataLength + alignment - 1) & ~(alignment - 1))
        var control = [UInt8](repeating: 0, count: space)
        control.withUnsafeMutableBytes { raw in
            var header = cmsghdr()
            header.cmsg_len = headerLength + dataLength
            header.cmsg_level = SOL_SOCKET
            header.cmsg_type = Int32(SCM_RIGHTS)
            raw.storeBytes(of: header, as: cmsghdr.self)
            raw.storeBytes(of: descriptor, toByteOffset: headerLength, as: Int32.self)
        }
        while true {
            let result = bytes.withUnsafeMutableBytes { data in
                control.withUnsafeMutableBytes { controlBytes in
                    withUnsafeMutablePointer(to: &address.storage) { name in
                        var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                        return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                            var message = msghdr()
                            message.msg_name = UnsafeMutableRawPointer(name)
                            message.msg_namelen = address.length
                            message.msg_iov = vectorPointer
                            message.msg_iovlen = 1
                            message.msg_control = controlBytes.baseAddress
                            message.msg_controllen = controlBytes.count
                            return sendmsg(self.descriptor, &message, flags)
                        }
                    }
                }
            }
            if result >= 0 { return .sent }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, ENOBUFS: return .wouldBlock
            case let code: return .failed(code)
            }
        }
    }
}

// The C calls whose names DatagramSocket's own methods shadow.
private func systemConnect(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(descriptor, address, length)
}

private func systemSend(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    send(descriptor, bytes, count, flags)
}
