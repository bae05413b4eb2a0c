import VigilPOSIX

/// Reading from or writing to an accepted ``Connection`` failed.
///
/// The ``description`` says what happened to the connection (`peer 127.0.0.1:50312: …`); a
/// handler logs it and closes the connection.
public struct ConnectionError: Error, Hashable, CustomStringConvertible {
    /// What kind of failure this is; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case lineTooLong, endedMidLine, notUTF8, timedOut, stopDeadlinePassed, closed, cancelled, failed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A line longer than the reader's `maximumBytes` (without its line break).
        public static let lineTooLong = Self(.lineTooLong)
        /// The peer closed its side in the middle of a line.
        public static let endedMidLine = Self(.endedMidLine)
        /// A line that is not UTF-8 (``Connection/readLine(maximumBytes:timeout:)``).
        public static let notUTF8 = Self(.notUTF8)
        /// The call's own `timeout` passed first.
        public static let timedOut = Self(.timedOut)
        /// The daemon is stopping and the deadline it handed the connection passed.
        public static let stopDeadlinePassed = Self(.stopDeadlinePassed)
        /// The connection was closed by this process.
        public static let closed = Self(.closed)
        /// The calling task was cancelled.
        public static let cancelled = Self(.cancelled)
        /// A system call failed (the peer reset the connection, say): ``ConnectionError/cause``.
        public static let failed = Self(.failed)

        public var description: String { String(describing: base) }
    }

    /// The kind of failure.
    public let code: Code
    /// What happened.
    public let message: String
    /// The failed system call, for ``Code/failed``.
    public let cause: SystemError?

    init(_ code: Code, _ message: String, cause: SystemError? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }
}
