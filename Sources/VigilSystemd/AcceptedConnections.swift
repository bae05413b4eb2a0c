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
/// Nothing blocks a thread of Swift concurrency (nor ``EventLoopExecutor``'s one thread): the
/// socket and its connections are non-blocking, and one thread per sequence waits in `poll(2)`
/// for them (the event loop has no descriptor readiness to lend), woken through an eventfd.
///
/// **Stopping.** ``stop(deadline:)`` ends the sequence at once — a waiting `next()` returns
/// `nil` — without `shutdown(2)` or `close(2)` on the listening socket: a socket systemd passed is
/// shared with systemd, which keeps it listening while the service restarts, so connections
/// that arrive meanwhile wait in its queue for the next instance instead of being refused. The
/// open connections are handed the deadline (``Connection/stopDeadline``): one idle between
/// requests ends its read at once, one in the middle of a request may finish until the
/// deadline. `ServiceListener` hands its part that deadline (`ReadySignal.onStop(_:)`).
///
/// **Failures.** Out of descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`), the
/// sequence waits 100 ms and accepts again, rather than spin on a socket that stays readable; a
/// connection that failed before it was accepted (`ECONNABORTED`, network errors) is skipped.
/// Only a descriptor that is no listening socket (`EBADF`, `EINVAL`, `ENOTSOCK`) throws.
public final class AcceptedConnections: AsyncSequence, Sendable {
    public typealias Element = Connection

    /// The listening socket. It stays open after the stop: close it, if it is yours, after the
    /// stop (``ListeningSocket/close()``).
    public let socket: ListeningSocket
    private let poller: SocketPoller

    /// Makes the socket non-blocking and prepares its poll thread (started by the first wait).
    ///
    /// - Throws: ``SystemError`` when the socket cannot be made non-blocking or the eventfd
    ///   cannot be created (out of descriptors).
    public init(_ socket: ListeningSocket) throws(SystemError) {
        let flags = fcntl(socket.fileDescriptor, F_GETFL)
        guard flags >= 0, fcntl(socket.fileDescriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw SystemError(path: "\(socket.localAddress)", operation: "make non-blocking the socket", errno: errno)
        }
        self.socket = socket
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
    public func stop(gracePeriod: Duration) {
        stop(deadline: ContinuousClock.now.advanced(by: gracePeriod))
    }

    /// True once ``stop(deadline:)`` was called.
    public var isStopped: Bool { poller.stopDeadline != nil }

    /// Connections accepted and not yet closed (for a connection limit).
    public var openConnections: Int { poller.openConnectionCount }

    public func makeAsyncIterator() -> Iterator {
        Iterator(connections: self)
    }

    /// Accepts the next connection, waiting for one.
    public struct Iterator: AsyncIteratorProtocol {
        let connections: AcceptedConnections

        /// The next connection, or `nil` once the sequence was stopped or the task cancelled.
        ///
        /// - Throws: ``SystemError`` when the descriptor is no listening socket.
        public mutating func next() async throws -> Connection? {
            try await connections.accept()
        }
    }

    private func accept() async throws(SystemError) -> Connection? {
        let fd = socket.fileDescriptor
        while !isStopped {
            let connection = SystemCall.accept(fd, flags: Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if connection >= 0 {
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
                // The connection stays queued; try again once something may have been freed.
                let outcome = await poller.wait(
                    for: -1,
                    events: 0,
                    idle: true,
                    deadline: MonotonicClock.nanoseconds() &+ 100_000_000
                )
                if outcome == .stopping || outcome == .cancelled { return nil }
            default:
                throw SystemError(path: "\(socket.localAddress)", operation: "accept a connection on", errno: code)
            }
        }
        return nil
    }
}

extension ListeningSocket {
    /// The connections this socket accepts, as an async sequence (``AcceptedConnections``).
    ///
    /// Call it once per socket: each sequence has its own poll thread and stop.
    public func connections() throws(SystemError) -> AcceptedConnections {
        try AcceptedConnections(self)
    }
}
