import Synchronization
import VigilPOSIX
import VigilPlatform

/// Sends notifications to the service manager's `NOTIFY_SOCKET`, as `sd_notify(3)` does, but
/// without ever blocking the caller.
///
/// `sd_notify` opens a socket and sends with a blocking `sendmsg` on every call: under a frozen
/// or slow systemd its queue fills and the daemon's event loop would stall. This notifier keeps
/// one socket per address and sends with `MSG_DONTWAIT`. When systemd's queue is full, the
/// datagram, and every one after it while any wait, goes to a helper thread that sends them in
/// order as soon as systemd takes them: `READY=1` is late, never lost, and the loop never waits.
/// A `WATCHDOG=1` that would only wait behind others is skipped (a late ping proves nothing).
///
/// `NOTIFY_SOCKET` is read on every send and never unset: a notification sent later (a reload,
/// the stop) must still reach systemd. Paths and abstract names (`@…`) are supported, which is
/// what systemd gives every service. Any other address kind (`vsock:CID:PORT`, which systemd 254
/// and later read for a virtual machine reporting to its host, never for a unit) fails with
/// `EAFNOSUPPORT` and a message that says so: Vigil needs no libsystemd at run time, and a
/// vsock peer could take neither the sender's credentials nor the descriptors of `FDSTORE=1`.
public struct SystemdNotifier: Sendable {
    /// Creates a notifier for the socket named by `NOTIFY_SOCKET`.
    public init() {}

    /// `true` when `NOTIFY_SOCKET` is set, i.e. a service manager listens.
    public var isEnabled: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// Sends `text` (newline-separated assignments such as `READY=1\nSTATUS=Running`) as one
    /// datagram.
    ///
    /// Without `NOTIFY_SOCKET` this does nothing: running outside systemd is not an error.
    /// Keep `text` under ``NotifyMessage``'s 4096-byte datagram limit, or systemd ignores it.
    ///
    /// - Throws: ``SystemError`` when the socket is set but the send fails (nobody listens at
    ///   the address, say). A full queue is not a failure: the datagram is sent later, in order.
    public func send(_ text: String) throws {
        _ = try send(text, passing: nil)
    }

    /// Sends `text` as one datagram with a duplicate of `descriptor` attached (`SCM_RIGHTS`), as
    /// `sd_pid_notify_with_fds(3)` does for `FDSTORE=1`. The descriptor is duplicated first, so
    /// the caller may close its own at once, also when the datagram waits behind others.
    ///
    /// - Returns: `false` when `NOTIFY_SOCKET` is unset (nothing sent).
    /// - Throws: ``SystemError`` as ``send(_:)`` does, and for a descriptor that cannot be
    ///   duplicated (`EBADF`, `EMFILE`).
    @discardableResult
    package func send(_ text: String, passing descriptor: Int32?) throws(SystemError) -> Bool {
        guard let pointer = getenv("NOTIFY_SOCKET") else { return false }
        let address = String(cString: pointer)
        guard let connection = NotifyConnection.for(address) else {
            throw SystemError(
                path: "NOTIFY_SOCKET='\(address.prefix(80))'",
                operation: "send '\(text.prefix(40))' to",
                errno: EAFNOSUPPORT,
                detail: "it is neither an absolute path nor an @abstract name (vsock: and other kinds are not "
                    + "supported, and systemd gives services an AF_UNIX socket), or it is longer than 107 bytes"
            )
        }
        var duplicate: Int32?
        if let descriptor {
            let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
            guard copy >= 0 else {
                let code = errno
                throw SystemError(
                    path: address,
                    operation: "send '\(text.prefix(40))' with fd \(descriptor) to the service manager's NOTIFY_SOCKET",
                    errno: code,
                    detail: "cannot duplicate the descriptor: \(SystemError.describe(code))"
                )
            }
            duplicate = copy
        }
        if let code = connection.send(text, passing: duplicate) {
            throw SystemError(
                path: address,
                operation: "send '\(text.prefix(40))' to the service manager's NOTIFY_SOCKET",
                errno: code
            )
        }
        return true
    }

    /// Datagrams waiting for systemd to take them (tests).
    package static var backlog: Int { NotifyConnection.current.withLock { $0?.backlog ?? 0 } }
}

/// One socket to one `NOTIFY_SOCKET` address, with the datagrams that wait for it.
private final class NotifyConnection: Sendable {
    /// The connection for the address last used (`NOTIFY_SOCKET` rarely changes; tests change it).
    static let current = Mutex<NotifyConnection?>(nil)

    static func `for`(_ address: String) -> NotifyConnection? {
        current.withLock { current in
            if let connection = current, connection.address == address { return connection }
            guard let socket = DatagramSocket(address: address) else { return nil }
            let connection = NotifyConnection(address: address, socket: socket)
            current = connection
            return connection
        }
    }

    /// A datagram that waits, with the duplicate descriptor it carries (closed once sent).
    struct Pending {
        var text: String
        var descriptor: Int32?
    }

    struct Queue {
        var waiting: [Pending] = []
        var senderRunning = false
    }

    let address: String
    private let socket: DatagramSocket
    private let queue = Mutex(Queue())
    /// More than this many waiting datagrams: systemd is not reading at all. Keep the newest.
    private static let maximumBacklog = 256

    private init(address: String, socket: DatagramSocket) {
        self.address = address
        self.socket = socket
    }

    var backlog: Int { queue.withLock { $0.waiting.count } }

    /// Sends `text` (with `descriptor`, which this takes over and closes) now, or queues it
    /// behind earlier ones; returns an errno on failure.
    func send(_ text: String, passing descriptor: Int32? = nil) -> Int32? {
        let (failure, startSender): (Int32?, Bool) = queue.withLock { queue in
            if queue.waiting.isEmpty {
                switch Self.send(text, descriptor, on: socket, blocking: false) {
                case .sent: return (nil, false)
                case .failed(let code): return (code, false)
                case .wouldBlock: break
                }
            } else if text == "WATCHDOG=1" && descriptor == nil {
                return (nil, false)
            } else if queue.waiting.count >= Self.maximumBacklog {
                // Keep the newest: the state systemd should end up with (the last READY=1, say)
                // comes last. The oldest waiting datagram without a descriptor goes, never the
                // first (the sender may be sending it); with none, the new one goes.
                guard
                    let oldest = queue.waiting.indices.dropFirst().first(where: { queue.waiting[$0].descriptor == nil })
                else {
                    if let descriptor { close(descriptor) }
                    return (nil, false)
                }
                queue.waiting.remove(at: oldest)
            }
            queue.waiting.append(Pending(text: text, descriptor: descriptor))
            let start = !queue.senderRunning
            queue.senderRunning = true
            return (nil, start)
        }
        if startSender { spawnSender() }
        return failure
    }

    /// The helper thread: blocking sends, in order, until nothing waits. A send that fails for
    /// good is reported on stderr (the journal may be the thing that is stuck).
    private func drain() {
        while true {
            let next: Pending? = queue.withLock { queue in
                guard let first = queue.waiting.first else {
                    queue.senderRunning = false
                    return nil
                }
                return first
            }
            guard let next else { return }
            let text = next.text
            switch Self.send(text, next.descriptor, on: socket, blocking: true) {
            case .sent: break
            case .wouldBlock:
                // ENOBUFS even when blocking: the datagram is dropped, its descriptor with it.
                if let descriptor = next.descriptor { close(descriptor) }
            case .failed(let code):
                StderrLogHandler.writeToStandardError(
                    "<3>Could not send '\(StderrLogHandler.escaped(String(text.prefix(40))))' to the service "
                        + "manager's NOTIFY_SOCKET (errno \(code)); it may consider the daemon hung\n"
                )
            }
            queue.withLock { _ = $0.waiting.removeFirst() }
        }
    }

    /// One send attempt; a descriptor is closed unless the datagram must wait and retry.
    private static func send(
        _ text: String,
        _ descriptor: Int32?,
        on socket: DatagramSocket,
        blocking: Bool
    ) -> DatagramSocket.Outcome {
        guard let descriptor else { return socket.send(text, blocking: blocking) }
        let outcome = socket.send(text, passing: descriptor, blocking: blocking)
        if outcome != .wouldBlock { close(descriptor) }
        return outcome
    }

    private func spawnSender() {
        if !PosixThread.start({ self.drain() }) {
            // No thread: send in place, blocking, rather than lose READY=1.
            drain()
        }
    }
}
