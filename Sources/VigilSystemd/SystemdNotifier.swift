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
/// When no thread can be started (`LimitNPROC=` reached), the datagrams wait all the same (past
/// 256 the oldest are dropped and counted), each later notification sends what systemd takes
/// without waiting and tries a thread again, and one line on stderr says so: never a blocking send.
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
    package var isEnabled: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// Sends `text` (newline-separated assignments such as `READY=1\nSTATUS=Running`) as one
    /// datagram.
    ///
    /// Without `NOTIFY_SOCKET` this does nothing: running outside systemd is not an error.
    /// Keep `text` under `NotifyMessage`'s 4096-byte datagram limit, or systemd ignores it.
    ///
    /// - Throws: ``VigilPOSIX/SystemError`` when the socket is set but the send fails (nobody listens at
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
        try send(text, passing: descriptor, handingOver: false)
    }

    /// `send(_:passing:)`, where `handingOver` gives the descriptor itself to the notifier (no
    /// duplicate, one descriptor fewer: the exit barrier needs it at the descriptor limit); the
    /// notifier then closes it, whatever happens, and the caller must not.
    private func send(_ text: String, passing descriptor: Int32?, handingOver: Bool) throws(SystemError) -> Bool {
        var handed = handingOver ? descriptor : nil
        defer { if let handed { close(handed) } }
        guard let pointer = getenv("NOTIFY_SOCKET") else { return false }
        let address = String(cString: pointer)
        let connection: NotifyConnection
        switch NotifyConnection.for(address) {
        case .success(let opened): connection = opened
        case .failure(.socket(let code)):
            throw SystemError(
                path: address,
                operation: "send '\(text.prefix(40))' to the service manager's NOTIFY_SOCKET",
                errno: code,
                detail: "cannot open a socket: \(SystemError.describe(code))"
            )
        case .failure(.address):
            throw SystemError(
                path: "NOTIFY_SOCKET='\(address.prefix(80))'",
                operation: "send '\(text.prefix(40))' to",
                errno: EAFNOSUPPORT,
                detail: "it is neither an absolute path nor an @abstract name (vsock: and other kinds are not "
                    + "supported, and systemd gives services an AF_UNIX socket), or it is longer than 107 bytes"
            )
        }
        var duplicate: Int32?
        if handingOver {
            duplicate = handed
            handed = nil
        } else if let descriptor {
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
        let failed = connection.send(text, passing: duplicate)
        // Counted once it is on its way (or failed), never before: see sendBarrierAhead().
        Self.sent.add(1, ordering: .releasing)
        if let code = failed {
            throw SystemError(
                path: address,
                operation: "send '\(text.prefix(40))' to the service manager's NOTIFY_SOCKET",
                errno: code
            )
        }
        return true
    }

    /// Waits, at most `timeout`, until the service manager has processed every notification sent
    /// before, as `sd_notify_barrier(3)` does: sends `BARRIER=1` with one end of a new socket pair
    /// (`SCM_RIGHTS`), closes this process's copy of that end, and waits for the other end to
    /// report hang-up, which happens when systemd has handled the datagram and closed what it
    /// received. systemd handles notifications in order, and this notifier sends them in order
    /// (datagrams that wait for a full queue included), so a confirmed barrier means every
    /// earlier `STATUS=`, `STOPPING=1` and `FDSTORE=1` was seen.
    ///
    /// Call it before the process exits: datagrams that still wait on the notifier's helper
    /// thread would be lost with the process, and systemd may not attribute a datagram to the
    /// unit once it has reaped the sender.
    ///
    /// - Important: Blocks the calling thread for up to `timeout` (a frozen manager costs that
    ///   much). Call it when nothing else needs the thread, e.g. after the daemon stopped.
    /// - Returns: `true` when the service manager confirmed, or `NOTIFY_SOCKET` is unset (nothing
    ///   to wait for); `false` when `timeout` passed without a confirmation.
    /// - Throws: ``VigilPOSIX/SystemError`` when the socket pair cannot be made or the send fails.
    public func barrier(timeout: Duration) throws(SystemError) -> Bool {
        guard getenv("NOTIFY_SOCKET") != nil else { return true }
        if let ahead = Self.ahead.withLock({ $0.take() }) {
            defer { close(ahead.descriptor) }
            // Sent ahead and nothing sent since: it stands for everything; systemd has
            // usually confirmed it by now, so the wait costs a poll, not a round trip.
            if ahead.sent == Self.sent.load(ordering: .acquiring) {
                return Self.awaitHangUp(ahead.descriptor, timeout: timeout)
            }
        }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            let code = errno
            throw SystemError(path: "for BARRIER=1", operation: "make a socket pair", errno: code)
        }
        defer { close(ends[0]) }
        // Handed over, not duplicated: at the exit the process may be at its descriptor limit.
        guard try send("BARRIER=1", passing: ends[1], handingOver: true) else { return true }
        return Self.awaitHangUp(ends[0], timeout: timeout)
    }

    /// Sends `BARRIER=1` now, without waiting, for a ``barrier(timeout:)`` to come: when
    /// nothing else is sent in between, that call waits on this one, which systemd has most
    /// likely handled meanwhile, instead of sending a new one and waiting for systemd's turn.
    /// The mediator calls it right after `STOPPING=1` (usually the last notification), so the
    /// service manager's round trip overlaps the listeners' stop instead of adding to it.
    /// A failure is not reported here: the barrier at exit is then sent as usual.
    package func sendBarrierAhead() {
        guard getenv("NOTIFY_SOCKET") != nil else { return }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            return
        }
        let before = Self.sent.load(ordering: .acquiring)
        guard (try? send("BARRIER=1", passing: ends[1], handingOver: true)) == true else {
            close(ends[0])
            return
        }
        let after = Self.sent.load(ordering: .acquiring)
        // Another thread's datagram between the two loads may have gone before or after the
        // barrier: then it does not stand for everything, and the exit sends a new one.
        let previous = Self.ahead.withLock { ahead in
            defer { ahead = after == before &+ 1 ? (ends[0], after) : nil }
            return ahead
        }
        if let previous { close(previous.descriptor) }
        if after != before &+ 1 { close(ends[0]) }
    }

    /// Whether a process about to exit must wait for systemd to confirm what it sent
    /// (``barrier(timeout:)``) lest a notification be lost: when datagrams still wait in this
    /// process (systemd's queue was full: they die with it), or when this process is not the
    /// one systemd started (`SYSTEMD_EXEC_PID`, set by systemd 248 and later, names another:
    /// systemd finds the unit of any other process from its control group, which it can no
    /// longer read once that process has exited).
    ///
    /// Otherwise every datagram is in systemd's socket queue, which survives the sender, and
    /// systemd reads that queue before it handles the exit of the process it started (its
    /// notification socket has a higher priority than `SIGCHLD`, "so that we can still identify
    /// to which service an exit message belongs", manager.c), so nothing needs waiting for.
    /// `SYSTEMD_EXEC_PID` unset or empty (systemd before 248, no service manager that sets it)
    /// counts as this process; any other value that is not this process's pid, as another.
    package var exitNeedsBarrier: Bool {
        guard getenv("NOTIFY_SOCKET") != nil else { return false }
        if NotifyConnection.current.withLock({ $0?.hasWaiting ?? false }) { return true }
        guard let pointer = getenv("SYSTEMD_EXEC_PID"), pointer.pointee != 0 else { return false }
        guard let pid = Watchdog.decimal(String(cString: pointer)) else { return true }
        return pid != UInt64(getpid())
    }

    /// Closes the barrier sent ahead, if one is held, without waiting for its answer.
    package static func dropBarrierAhead() {
        if let ahead = ahead.withLock({ $0.take() }) { close(ahead.descriptor) }
    }

    /// Whether a barrier sent ahead waits to be confirmed at exit (its descriptor is held until
    /// then).
    package static var holdsBarrierAhead: Bool { ahead.withLock { $0 != nil } }

    /// The barrier sent ahead (this process's end of its socket pair) and the number of
    /// datagrams sent up to and including it.
    private static let ahead = Mutex<(descriptor: Int32, sent: UInt64)?>(nil)

    /// Datagrams handed to the connection so far (sent or queued, in order).
    private static let sent = Atomic<UInt64>(0)

    /// Polls `descriptor` until it reports `POLLHUP`, at most `timeout`; `true` when it did.
    private static func awaitHangUp(_ descriptor: Int32, timeout: Duration) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: max(timeout, .zero))
        // Rounded up to whole milliseconds, so a wait never ends just short of the deadline.
        func millisecondsLeft() -> Int32 {
            let (seconds, attoseconds) = max(clock.now.duration(to: deadline), .zero).components
            return Int32(min(seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000, 3_600_000))
        }
        while true {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let result = SystemCall.poll(&entry, 1, timeout: millisecondsLeft())
            if result < 0 { return false }
            if result > 0 {
                if entry.revents & Int16(POLLHUP) != 0 { return true }
                guard entry.revents & Int16(POLLIN) != 0 else { return false }  // POLLERR, POLLNVAL
                // Bytes (nothing systemd sends) are read away; end of file is the hang-up.
                var byte: UInt8 = 0
                let count = withUnsafeMutableBytes(of: &byte) { SystemCall.read(descriptor, into: $0) }
                if count == 0 { return true }
                if count < 0 { return false }
                continue
            }
            if clock.now >= deadline { return false }
        }
    }

    /// Datagrams waiting for systemd to take them (tests).
    package static var backlog: Int { NotifyConnection.current.withLock { $0?.backlog ?? 0 } }

    /// Datagrams dropped because systemd did not take them and the backlog was full (tests).
    package static var dropped: Int { NotifyConnection.current.withLock { $0?.dropped ?? 0 } }

    /// Sends `text` to `address` as ``send(_:)`` sends to `NOTIFY_SOCKET`, through the same
    /// connection and queue (tests: the test runner never sets `NOTIFY_SOCKET`); the errno of a
    /// failure, or `nil`.
    package static func send(_ text: String, toAddress address: String) -> Int32? {
        switch NotifyConnection.for(address) {
        case .success(let connection): connection.send(text)
        case .failure(.socket(let code)): code
        case .failure(.address): EAFNOSUPPORT
        }
    }
}

/// One socket to one `NOTIFY_SOCKET` address, with the datagrams that wait for it.
private final class NotifyConnection: Sendable {
    /// The connection for the address last used (`NOTIFY_SOCKET` rarely changes; tests change it).
    static let current = Mutex<NotifyConnection?>(nil)

    static func `for`(_ address: String) -> Result<NotifyConnection, DatagramSocket.OpenFailure> {
        current.withLock { current in
            if let connection = current, connection.address == address { return .success(connection) }
            let socket: DatagramSocket
            do throws(DatagramSocket.OpenFailure) {
                socket = try DatagramSocket(opening: address)
            } catch {
                return .failure(error)
            }
            let connection = NotifyConnection(address: address, socket: socket)
            current = connection
            return .success(connection)
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
        /// The sender thread could not be started (`pthread_create` failed: `RLIMIT_NPROC`,
        /// memory) and has not been since; said once per such stretch.
        var senderRefused = false
        /// Datagrams dropped because the backlog was full.
        var dropped = 0
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

    /// Whether datagrams wait to be sent, or one is being sent by the sender thread.
    var hasWaiting: Bool { queue.withLock { !$0.waiting.isEmpty || $0.senderRunning } }

    /// Datagrams dropped from a full backlog so far.
    var dropped: Int { queue.withLock { $0.dropped } }

    /// Sends `text` (with `descriptor`, which this takes over and closes) now, or queues it
    /// behind earlier ones; returns an errno on failure.
    func send(_ text: String, passing descriptor: Int32? = nil) -> Int32? {
        let (failure, startSender): (Int32?, Bool) = queue.withLock { queue in
            if !queue.senderRunning && !queue.waiting.isEmpty {
                // No sender thread could be started: what systemd takes now goes, in order,
                // without waiting; the rest waits for a thread (retried below).
                sendWaitingWithoutBlocking(&queue)
            }
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
                    queue.dropped += 1
                    return (nil, false)
                }
                queue.waiting.remove(at: oldest)
                queue.dropped += 1
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

    /// Sends waiting datagrams, oldest first, while systemd takes them without blocking; only
    /// when no sender thread runs (it owns the head of the queue otherwise).
    private func sendWaitingWithoutBlocking(_ queue: inout Queue) {
        while let first = queue.waiting.first {
            switch Self.send(first.text, first.descriptor, on: socket, blocking: false) {
            case .wouldBlock: return
            case .sent, .failed: queue.waiting.removeFirst()
            }
        }
    }

    private func spawnSender() {
        let refusal: SystemError
        do {
            try SystemThread.startDetached { self.drain() }
            let recovered = queue.withLock { queue in
                defer { queue.senderRefused = false }
                return queue.senderRefused
            }
            if recovered {
                StderrLogHandler.writeToStandardError(
                    "<5>The notify sender thread runs again; waiting notifications go to the service manager\n"
                )
            }
            return
        } catch {
            refusal = error
        }
        // No thread (RLIMIT_NPROC reached, or no memory): never send in place with a blocking
        // call, which would wait in the kernel for as long as systemd does not read and leave
        // every signal (SIGTERM too) unanswered. The datagrams stay queued (the oldest dropped
        // beyond the bound, as always) and the next notification tries a thread again.
        let (firstRefusal, waiting) = queue.withLock { queue in
            queue.senderRunning = false
            defer { queue.senderRefused = true }
            return (!queue.senderRefused, queue.waiting.count)
        }
        if firstRefusal {
            StderrLogHandler.writeToStandardError(
                "<3>Cannot start the thread that sends to the service manager's NOTIFY_SOCKET (pthread_create: "
                    + "\(SystemError.describe(refusal.errno))"
                    + (refusal.errno == EAGAIN ? ", RLIMIT_NPROC / LimitNPROC= reached?" : "")
                    + "): \(waiting) notification(s) wait, kept in order (past \(Self.maximumBacklog) the oldest "
                    + "are dropped and counted) and retried with the next notification\n"
            )
        }
    }
}
