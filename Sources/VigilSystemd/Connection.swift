import Synchronization
import VigilEventLoop
import VigilPOSIX
import VigilPlatform

/// One accepted stream connection, from ``AcceptedConnections``: a non-blocking descriptor this
/// object owns, with a line reader and a writer that suspend the task (never the thread) until
/// the socket is ready.
///
/// ```swift
/// while let line = try await connection.readLine() {
///     try await connection.write(answer(line) + "\n")
/// }
/// connection.close()
/// ```
///
/// At stop (``AcceptedConnections/stop(deadline:)``) the connection is handed the deadline:
/// a read that waits for a new request with nothing of it received ends at
/// once (``readLine(maximumBytes:timeout:)`` returns `nil`, as at the end of the stream), and a
/// request half received, or an answer half written, may go on until the deadline. A connection
/// that has sent nothing yet is waited for until the deadline too: its client connected before
/// the stop and its first request is on its way (ending it would lose that request across a
/// restart, where the next instance would have served it). After the deadline
/// every call throws ``SystemdError/Code/stopDeadlinePassed``. So a handler written as the
/// loop above drains by itself: it answers what is in flight and ends.
///
/// The descriptor is closed by ``close()``, or when the object is released.
public final class Connection: Sendable, CustomStringConvertible {
    /// The connected socket (non-blocking, `FD_CLOEXEC`), valid until ``close()``. Reading or
    /// writing it directly bypasses the line buffer.
    package let fileDescriptor: Int32
    /// Who is on the other side, for logs: `127.0.0.1:50312`, `[::1]:50312`, or for a Unix
    /// socket the peer's credentials, `pid 4242 uid 0`.
    public let peer: String

    private struct State {
        var buffer: [UInt8] = []
        /// The peer closed its side.
        var ended = false
        var closed = false
        /// Some byte came: a read between requests is idle from now on (before it, the first
        /// request is on its way).
        var receivedAny = false
    }

    private let state = Mutex(State())
    private let poller: SocketPoller

    init(fileDescriptor: Int32, poller: SocketPoller) {
        self.fileDescriptor = fileDescriptor
        self.poller = poller
        self.peer = Self.describePeer(of: fileDescriptor)
    }

    deinit {
        close()
    }

    public var description: String { "connection from \(peer)" }

    /// The instant by which the daemon wants this connection finished, once it began to stop;
    /// `nil` while it runs.
    package var stopDeadline: ContinuousClock.Instant? {
        poller.stopDeadline.map { deadline in
            let now = MonotonicClock.nanoseconds()
            let remaining = deadline > now ? Duration.nanoseconds(Int64(clamping: deadline - now)) : .zero
            return ContinuousClock.now.advanced(by: remaining)
        }
    }

    /// Reads one line of UTF-8 text, without its line break (`\n`, or `\r\n`).
    ///
    /// - Parameters:
    ///   - maximumBytes: the longest line accepted, line break excluded.
    ///   - timeout: how long to wait for the rest of the line; `nil` waits as long as the peer
    ///     (or the stop's deadline) allows.
    /// - Returns: the line, or `nil` at the end of the stream, or at stop when no part of a
    ///   new line had arrived.
    /// - Throws: ``SystemdError``, whose ``SystemdError/code`` is one of `lineTooLong`,
    ///   `notUTF8`, `timedOut`, `stopDeadlinePassed` and `closed`, or another when the peer
    ///   closed its side after part of a line, the task was cancelled or a system call failed.
    public func readLine(maximumBytes: Int = 8192, timeout: Duration? = nil) async throws(SystemdError) -> String? {
        guard let bytes = try await readLineBytes(maximumBytes: maximumBytes, timeout: timeout) else { return nil }
        guard let line = String(validating: bytes, as: UTF8.self) else {
            throw SystemdError(.notUTF8, "\(description): a line of \(bytes.count) bytes is not UTF-8")
        }
        return line
    }

    /// ``readLine(maximumBytes:timeout:)`` as bytes, for a protocol that is not all text.
    package func readLineBytes(
        maximumBytes: Int = 8192,
        timeout: Duration? = nil
    ) async throws(SystemdError)
        -> [UInt8]?
    {
        let deadline = timeout.map { MonotonicClock.nanoseconds() &+ $0.nanoseconds }
        // Room for the `\r` before the line break without overflow, whatever the caller asks.
        let maximumBytes = min(max(0, maximumBytes), Int.max - 2)
        while true {
            let step = try state.withLock { state throws(SystemdError) -> ReadStep in
                while true {
                    if let end = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                        var line = Array(state.buffer[..<end])
                        state.buffer.removeSubrange(...end)
                        if line.last == UInt8(ascii: "\r") { line.removeLast() }
                        guard line.count <= maximumBytes else { throw tooLong(maximumBytes) }
                        return .bytes(line)
                    }
                    // One byte more for a `\r` before the line break.
                    guard state.buffer.count <= maximumBytes + 1 else { throw tooLong(maximumBytes) }
                    if state.ended {
                        guard state.buffer.isEmpty else {
                            throw SystemdError(
                                .endedMidLine,
                                "\(description): the peer closed the connection after \(state.buffer.count) bytes of a line without its line break"
                            )
                        }
                        return .end
                    }
                    guard try fill(&state) else { return .wait(idle: state.buffer.isEmpty && state.receivedAny) }
                }
            }
            switch step {
            case .bytes(let line): return line
            case .end: return nil
            case .wait(let idle):
                // A stop that finds the reader idle (no part of a request received) ends the stream.
                if try await waitFor(Int16(POLLIN), idle: idle, deadline: deadline, doing: "read a line") { return nil }
            }
        }
    }

    /// Reads what has arrived, up to `maximumBytes`, waiting for at least one byte.
    ///
    /// - Returns: the bytes (the line buffer's first), or `nil` at the end of the stream or at
    ///   stop when nothing was waiting.
    package func read(maximumBytes: Int = 65536, timeout: Duration? = nil) async throws(SystemdError) -> [UInt8]? {
        let deadline = timeout.map { MonotonicClock.nanoseconds() &+ $0.nanoseconds }
        while true {
            let step = try state.withLock { state throws(SystemdError) -> ReadStep in
                if state.buffer.isEmpty && !state.ended { _ = try fill(&state) }
                if !state.buffer.isEmpty {
                    let count = min(max(1, maximumBytes), state.buffer.count)
                    defer { state.buffer.removeFirst(count) }
                    return .bytes(Array(state.buffer.prefix(count)))
                }
                return state.ended ? .end : .wait(idle: state.receivedAny)
            }
            switch step {
            case .bytes(let bytes): return bytes
            case .end: return nil
            case .wait(let idle):
                if try await waitFor(Int16(POLLIN), idle: idle, deadline: deadline, doing: "read") { return nil }
            }
        }
    }

    /// Writes all of `text` as UTF-8, waiting while the peer's window is full.
    ///
    /// - Parameters:
    ///   - text: what to write.
    ///   - timeout: how long the whole write may take; `nil` waits as long as the peer (or the
    ///     stop's deadline) allows.
    /// - Throws: ``SystemdError``, whose ``SystemdError/code`` is `timedOut`,
    ///   `stopDeadlinePassed` or `closed`, or another when the task was cancelled or the peer is
    ///   gone (`EPIPE`, `ECONNRESET`: see ``SystemdError/cause``).
    public func write(_ text: String, timeout: Duration? = nil) async throws(SystemdError) {
        try await write(Array(text.utf8), timeout: timeout)
    }

    /// Writes all of `bytes`, waiting while the peer's window is full.
    ///
    /// - Parameters:
    ///   - bytes: what to write.
    ///   - timeout: how long the whole write may take; `nil` waits as long as the peer (or the
    ///     stop's deadline) allows.
    /// - Throws: ``SystemdError``: `timedOut`, `stopDeadlinePassed`, `closed`, `cancelled`,
    ///   `failed` (the peer is gone: `EPIPE`, `ECONNRESET`).
    package func write(_ bytes: [UInt8], timeout: Duration? = nil) async throws(SystemdError) {
        let deadline = timeout.map { MonotonicClock.nanoseconds() &+ $0.nanoseconds }
        var offset = 0
        while offset < bytes.count {
            let written = try state.withLock { state throws(SystemdError) -> Int in
                guard !state.closed else { throw closedError() }
                let outcome = bytes.withUnsafeBytes { raw in
                    SystemCall.nonBlocking(.send, .descriptor(fileDescriptor)) {
                        send(fileDescriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    }
                }
                switch outcome {
                case .done(let count): return count
                case .wouldBlock: return 0
                case .failed(let code):
                    throw SystemdError(
                        .failed,
                        "\(description): cannot write: \(SystemError.describe(code))",
                        cause: SystemError(path: description, operation: "write to", errno: code)
                    )
                }
            }
            offset += written
            if written == 0 {
                _ = try await waitFor(Int16(POLLOUT), idle: false, deadline: deadline, doing: "write")
            }
        }
    }

    /// Closes the descriptor; a read or write that waits ends with `closed`. Calling it again
    /// does nothing.
    public func close() {
        let wasOpen = state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        poller.connectionClosed(fileDescriptor)
        SystemCall.close(fileDescriptor)
    }

    // MARK: - Internals

    private enum ReadStep {
        case bytes([UInt8])
        case end
        /// Nothing to read yet; `idle` when no part of a request is buffered.
        case wait(idle: Bool)
    }

    /// One non-blocking read into the buffer. True when it read bytes or reached the end.
    private func fill(_ state: inout State) throws(SystemdError) -> Bool {
        guard !state.closed else { throw closedError() }
        let outcome = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16384) { chunk in
            let outcome = SystemCall.Outcome(
                SystemCall.read(fileDescriptor, into: UnsafeMutableRawBufferPointer(chunk))
            )
            if case .done(let count) = outcome, count > 0 {
                state.buffer.append(contentsOf: chunk[..<count])
                state.receivedAny = true
            }
            return outcome
        }
        switch outcome {
        case .done(0):
            state.ended = true
            return true
        case .done: return true
        case .wouldBlock: return false
        case .failed(let code):
            throw SystemdError(
                .failed,
                "\(description): cannot read: \(SystemError.describe(code))",
                cause: SystemError(path: description, operation: "read from", errno: code)
            )
        }
    }

    /// Waits until the socket is ready; true when the stop ended an idle wait.
    private func waitFor(
        _ events: Int16,
        idle: Bool,
        deadline: UInt64?,
        doing: String
    ) async throws(SystemdError)
        -> Bool
    {
        switch await poller.wait(for: fileDescriptor, events: events, idle: idle, deadline: deadline) {
        case .ready:
            return false
        case .stopping:
            return true
        case .timedOut:
            if let stop = poller.stopDeadline, MonotonicClock.nanoseconds() >= stop {
                throw SystemdError(
                    .stopDeadlinePassed,
                    "\(description): the daemon is stopping and the deadline it gave this connection passed before it could \(doing)"
                )
            }
            throw SystemdError(.timedOut, "\(description): timed out waiting to \(doing)")
        case .cancelled:
            if state.withLock({ $0.closed }) { throw closedError() }
            throw SystemdError(.cancelled, "\(description): cancelled while waiting to \(doing)")
        }
    }

    private func tooLong(_ maximumBytes: Int) -> SystemdError {
        SystemdError(.lineTooLong, "\(description): a line is longer than \(maximumBytes) bytes")
    }

    private func closedError() -> SystemdError {
        SystemdError(.closed, "\(description): the connection is closed")
    }

    /// `getpeername` for TCP; `SO_PEERCRED` for a Unix socket (its peer address is unnamed).
    private static func describePeer(of fd: Int32) -> String {
        switch ListeningSocket.peerAddress(of: fd) {
        case .unix:
            // struct ucred (pid, uid, gid): Glibc's module imports it only with _GNU_SOURCE.
            var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
            var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return "a Unix socket" }
            return "pid \(credentials.pid) uid \(credentials.uid)"
        case let address:
            return address.description
        }
    }
}
