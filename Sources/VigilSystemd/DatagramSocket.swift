import Synchronization
import VigilPOSIX
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
    private let address: UnixSocketAddress

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
        guard text.hasPrefix("/") || text.hasPrefix("@"), let address = UnixSocketAddress(text) else {
            throw .address
        }
        let descriptor = SystemCall.retrying32(.socket, .path(text)) {
            socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
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

    deinit { SystemCall.close(descriptor) }

    /// The outcome of a send as ``SystemCall`` reports it: `ENOBUFS` would block too.
    private static func outcome(_ result: SystemCall.Outcome) -> Outcome {
        switch result {
        case .done: .sent
        case .wouldBlock, .failed(ENOBUFS): .wouldBlock
        case .failed(let code): .failed(code)
        }
    }

    /// What the failure seam sees of a send on this socket: the address and the descriptor.
    private var subject: SystemCall.Subject { SystemCall.Subject(path: address.text, descriptor: descriptor) }

    /// Sends `bytes` as one datagram. The corresponding C function is `sendto(2)` with
    /// `MSG_DONTWAIT | MSG_NOSIGNAL`, or without `MSG_DONTWAIT` when `blocking`.
    package func send(_ bytes: UnsafeRawBufferPointer, blocking: Bool = false) -> Outcome {
        let flags = Int32(MSG_NOSIGNAL) | (blocking ? 0 : Int32(MSG_DONTWAIT))
        return address.withSocketAddress { name, length in
            Self.outcome(
                SystemCall.nonBlocking(.sendto, subject) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, flags, name, length)
                }
            )
        }
    }

    /// Connects the socket to its address, so that ``sendConnected(_:)`` goes to it without the
    /// kernel looking the path up again on every datagram; returns 0, or the errno (`ENOENT`,
    /// `ECONNREFUSED`: nobody listens). Connecting again re-targets it (the peer's socket was
    /// made anew). The corresponding C function is `connect(2)`.
    package func connect() -> Int32 {
        SystemCall.connect(descriptor, address) == 0 ? 0 : errno
    }

    /// Sends `bytes` as one datagram to the address ``connect()`` connected to. The
    /// corresponding C function is `send(2)` with `MSG_DONTWAIT | MSG_NOSIGNAL`.
    package func sendConnected(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        Self.outcome(
            SystemCall.nonBlocking(.send, subject) {
                systemSend(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
        )
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
        let result = bytes.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { controlBytes in
                address.withSocketAddress { name, length in
                    var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_name = UnsafeMutableRawPointer(mutating: name)
                        message.msg_namelen = length
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBytes.baseAddress
                        message.msg_controllen = controlBytes.count
                        return SystemCall.nonBlocking(.sendmsg, subject) { sendmsg(self.descriptor, &message, flags) }
                    }
                }
            }
        }
        return Self.outcome(result)
    }
}

// The C call whose name DatagramSocket's own methods shadow.
private func systemSend(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    send(descriptor, bytes, count, flags)
}
