import Logging
import Synchronization
import VigilEventLoop
import VigilPOSIX
import VigilPlatform

/// The connections a ``ListeningSocket`` accepts, as an async sequence: a line protocol or any
/// other stream protocol without SwiftNIO (for HTTP, SwiftNIO and Hummingbird stay the way:
/// `Examples/hello-http`).
///
/// ```swift
/// let connections = try socket.connections()
/// try await withThrowingDiscardingTaskGroup { group in
///     for try await connection in connections {
///         group.addTask { await serve(connection) }   // reads lines, writes answers, closes
///     }
/// }
/// ```
///
/// Nothing blocks a thread of Swift concurrency (nor ``VigilEventLoop/EventLoopExecutor``'s one thread): the
/// socket and its connections are non-blocking, and one thread per sequence waits in `poll(2)`
/// for them (the event loop has no descriptor readiness to lend), woken through an eventfd.
///
/// **Stopping.** ``stop(deadline:)`` ends the sequence at once — a waiting `next()` returns
/// `nil` — without `shutdown(2)` or `close(2)` on the listening socket: a socket systemd passed is
/// shared with systemd, which keeps it listening while the service restarts, so connections
/// that arrive meanwhile wait in its queue for the next instance instead of being refused. The
/// open connections are handed the deadline: one idle between
/// requests ends its read at once, one in the middle of a request may finish until the
/// deadline. `ServiceListener` hands its part that deadline (`ReadySignal.onStop(_:)`).
///
/// **Failures.** Out of descriptors or memory (`EMFILE`: the process's `RLIMIT_NOFILE`,
/// `LimitNOFILE=`; `ENFILE`: the system's; `ENOBUFS`, `ENOMEM`), the connection stays queued in
/// the socket and the sequence tries again after a pause that grows from 50 ms to 500 ms (never
/// spinning on a socket that stays readable, never blocking a thread of the pool or the event
/// loop), and goes on accepting as soon as a descriptor is free again. It logs one error when
/// accepting starts to fail, saying why and what to change, at most one reminder a minute while
/// it goes on, and one notice when it accepts again; a connection that failed before it was
/// accepted (`ECONNABORTED`, network errors) is skipped. Only a descriptor that is no listening
/// socket (`EBADF`, `EINVAL`, `ENOTSOCK`) throws.
public final class AcceptedConnections: AsyncSequence, Sendable {
    /// The listening socket. It stays open after the stop: close it, if it is yours, after the
    /// stop (``ListeningSocket/close()``).
    public let socket: ListeningSocket
    private let poller: SocketPoller
    private let logger: Logger
    /// Since when accepting fails for want of descriptors or memory, while it does.
    private let exhaustion = Mutex<Exhaustion?>(nil)

    private struct Exhaustion {
        let since: ContinuousClock.Instant
        var lastReport: ContinuousClock.Instant
        var failures = 1
        var pause: Duration = .milliseconds(50)
    }

    /// Makes the socket non-blocking and prepares its poll thread (started by the first wait).
    ///
    /// - Parameters:
    ///   - socket: the listening socket whose connections to accept.
    ///   - logger: where a failing accept is reported (out of descriptors); pass the
    ///     listener's (`ready.context.logger`). By default a logger labelled `vigil`, which a
    ///     Vigil daemon's logging system sends to the journal.
    /// - Throws: ``VigilPOSIX/SystemError`` when the socket cannot be made non-blocking or the eventfd
    ///   cannot be created (out of descriptors).
    package init(_ socket: ListeningSocket, logger: Logger = Logger(label: "vigil")) throws(SystemError) {
        let flags = fcntl(socket.fileDescriptor, F_GETFL)
        guard flags >= 0, fcntl(socket.fileDescriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw SystemError(path: "\(socket.localAddress)", operation: "make non-blocking the socket", errno: errno)
        }
        self.socket = socket
        self.logger = logger
        self.poller = try SocketPoller()
    }

    deinit {
        poller.stop(deadline: MonotonicClock.nanoseconds())
    }

    /// Stops accepting: a waiting `next()` returns `nil` at once, and so does every later one;
    /// open connections may finish until `deadline` (see the type's documentation). Only the
    /// first call counts. The listening socket is left as it is.
    public func stop(deadline: ContinuousClock.Instant) {
        let remaining = Swift.max(.zero, deadline - ContinuousClock.now)
        poller.stop(deadline: MonotonicClock.nanoseconds() &+ remaining.nanoseconds)
    }

    /// ``stop(deadline:)`` at `gracePeriod` from now.
    package func stop(gracePeriod: Duration) {
        stop(deadline: ContinuousClock.now.advanced(by: gracePeriod))
    }

    /// True once ``stop(deadline:)`` was called.
    package var isStopped: Bool { poller.stopDeadline != nil }

    /// Connections accepted and not yet closed (for a connection limit).
    package var openConnections: Int { poller.openConnectionCount }

    public func makeAsyncIterator() -> Iterator {
        Iterator(connections: self)
    }

    /// Accepts the next connection, waiting for one.
    public struct Iterator: AsyncIteratorProtocol {
        let connections: AcceptedConnections

        /// The next connection, or `nil` once the sequence was stopped or the task cancelled.
        ///
        /// - Throws: ``VigilPOSIX/SystemError`` when the descriptor is no listening socket.
        public mutating func next() async throws -> Connection? {
            try await connections.accept()
        }
    }

    private func accept() async throws(SystemError) -> Connection? {
        let fd = socket.fileDescriptor
        while !isStopped {
            let connection = SystemCall.accept(fd, flags: Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if connection >= 0 {
                recovered()
                poller.connectionOpened()
                return Connection(fileDescriptor: connection, poller: poller)
            }
            let code = errno
            switch code {
            case EAGAIN, EWOULDBLOCK:
                let outcome = await poller.wait(for: fd, events: Int16(POLLIN), idle: true)
                if outcome == .stopping || outcome == .cancelled { return nil }
            case ECONNABORTED, EPROTO, EPERM, ENETDOWN, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH,
                EOPNOTSUPP, ENETUNREACH:
                // accept(2): errors of the pending connection, not of the socket; the next one may do.
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // accept4 takes a descriptor before it looks at the queue: at the limit it fails
                // with an empty queue too. Nobody waiting is no failure: wait for a connection.
                var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&pending, 1, 0) == 0 {
                    let outcome = await poller.wait(for: fd, events: Int16(POLLIN), idle: true)
                    if outcome == .stopping || outcome == .cancelled { return nil }
                    continue
                }
                // The connection stays queued; try again once something may have been freed.
                let pause = exhausted(errno: code)
                let outcome = await poller.wait(
                    for: -1,
                    events: 0,
                    idle: true,
                    deadline: MonotonicClock.nanoseconds() &+ pause.nanoseconds
                )
                if outcome == .stopping || outcome == .cancelled { return nil }
            default:
                throw SystemError(path: "\(socket.localAddress)", operation: "accept a connection on", errno: code)
            }
        }
        return nil
    }

    /// Records a failed accept for want of resources: logs the first (and a reminder a minute);
    /// returns how long to pause before the next try.
    private func exhausted(errno code: Int32) -> Duration {
        let now = ContinuousClock.now
        let (report, pause) = exhaustion.withLock { state -> (String?, Duration) in
            guard var current = state else {
                state = Exhaustion(since: now, lastReport: now)
                return ("", .milliseconds(50))
            }
            current.failures += 1
            current.pause = Swift.min(current.pause * 2, .milliseconds(500))
            var report: String?
            if now - current.lastReport >= .seconds(60) {
                current.lastReport = now
                report = " for \(Self.format(now - current.since)) (\(current.failures) attempts)"
            }
            state = current
            return (report, current.pause)
        }
        if let report {
            logger.error(
                "Cannot accept connections on \(socket.localAddress)\(report): \(Self.reason(code)); they wait in the socket's queue, and accepting resumes when \(Self.remedy(code))",
                metadata: ["errno": "\(code)", "socket": "\(socket.localAddress)"]
            )
        }
        return pause
    }

    /// Ends a period of failed accepts: one notice that says how long it lasted.
    private func recovered() {
        guard let ended = exhaustion.withLock({ $0.take() }) else { return }
        logger.notice(
            "Accepting connections on \(socket.localAddress) again after \(Self.format(ContinuousClock.now - ended.since)) (\(ended.failures) attempts failed)",
            metadata: ["socket": "\(socket.localAddress)"]
        )
    }

    /// `850 ms`, `2.4 s`.
    private static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        return "\(milliseconds / 1000).\(milliseconds % 1000 / 100) s"
    }

    private static func reason(_ code: Int32) -> String {
        switch code {
        case EMFILE:
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            return "this process has no file descriptor left (EMFILE: its limit, RLIMIT_NOFILE, is \(limit.rlim_cur))"
        case ENFILE: return "the system has no file descriptor left (ENFILE: fs.file-max)"
        default: return "out of memory for the connection (\(code == ENOBUFS ? "ENOBUFS" : "ENOMEM"))"
        }
    }

    private static func remedy(_ code: Int32) -> String {
        switch code {
        case EMFILE: "connections close; raise LimitNOFILE= in the unit, or lower the daemon's connection limit"
        case ENFILE: "descriptors are freed system-wide; raise fs.file-max, or find the process that holds them"
        default: "memory is freed"
        }
    }
}

extension ListeningSocket {
    /// The connections this socket accepts, as an async sequence (``AcceptedConnections``).
    ///
    /// Call it once per socket: each sequence has its own poll thread and stop. `logger` hears
    /// a failing accept (see ``AcceptedConnections``): pass the listener's.
    public func connections(logger: Logger = Logger(label: "vigil")) throws(SystemError) -> AcceptedConnections {
        try AcceptedConnections(self, logger: logger)
    }
}
