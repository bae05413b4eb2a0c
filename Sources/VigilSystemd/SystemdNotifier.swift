import CVigilSystemd
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

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
/// the stop) must still reach systemd. Paths and abstract names (`@…`) are sent directly; any
/// other address kind (`vsock:`) goes through `sd_notify`.
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
    /// - Throws: ``SystemdError`` when the socket is set but the send fails (nobody listens at
    ///   the address, say). A full queue is not a failure: the datagram is sent later, in order.
    public func send(_ text: String) throws {
        guard let pointer = getenv("NOTIFY_SOCKET") else { return }
        let address = String(cString: pointer)
        guard let connection = NotifyConnection.for(address) else {
            let result = sd_notify(0, text)
            if result < 0 { throw SystemdError(errno: -result, Self.failure(text)) }
            return
        }
        if let code = connection.send(text) { throw SystemdError(errno: code, Self.failure(text)) }
    }

    private static func failure(_ text: String) -> String {
        "Could not send '\(text.prefix(40))' to the service manager's NOTIFY_SOCKET"
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

    struct Queue {
        var waiting: [String] = []
        var senderRunning = false
    }

    let address: String
    private let socket: DatagramSocket
    private let queue = Mutex(Queue())
    /// More than this many waiting datagrams: systemd is not reading at all. Keep the first.
    private static let maximumBacklog = 256

    private init(address: String, socket: DatagramSocket) {
        self.address = address
        self.socket = socket
    }

    var backlog: Int { queue.withLock { $0.waiting.count } }

    /// Sends `text` now, or queues it behind earlier ones; returns an errno on failure.
    func send(_ text: String) -> Int32? {
        let (failure, startSender): (Int32?, Bool) = queue.withLock { queue in
            if queue.waiting.isEmpty {
                switch socket.send(text) {
                case .sent: return (nil, false)
                case .failed(let code): return (code, false)
                case .wouldBlock: break
                }
            } else if text == "WATCHDOG=1" || queue.waiting.count >= Self.maximumBacklog {
                return (nil, false)
            }
            queue.waiting.append(text)
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
            let next: String? = queue.withLock { queue in
                guard let first = queue.waiting.first else {
                    queue.senderRunning = false
                    return nil
                }
                return first
            }
            guard let text = next else { return }
            if case .failed(let code) = socket.send(text, blocking: true) {
                StderrLogHandler.writeToStandardError(
                    "<3>Could not send '\(StderrLogHandler.escaped(String(text.prefix(40))))' to the service "
                        + "manager's NOTIFY_SOCKET (errno \(code)); it may consider the daemon hung\n"
                )
            }
            queue.withLock { _ = $0.waiting.removeFirst() }
        }
    }

    private func spawnSender() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { context in
                let connection = Unmanaged<NotifyConnection>.fromOpaque(context!).takeRetainedValue()
                connection.drain()
                return nil
            },
            context
        )
        if result == 0 {
            pthread_detach(thread)
        } else {
            // No thread: send in place, blocking, rather than lose READY=1.
            Unmanaged<NotifyConnection>.fromOpaque(context).release()
            drain()
        }
    }
}
