import VigilPOSIX

/// What failed in this module: a listening socket, an accepted connection, a credential or a
/// stored snapshot. One type with a ``Code``, as swift-system's `Errno` or NIO's `IOError`.
///
/// The ``message`` says what happened and what to change — usually a line of the unit
/// (`LoadCredential=`, `ListenStream=`, `FileDescriptorStoreMax=`); compare ``code`` with the
/// static members of ``Code``, never the message.
public struct SystemdError: Error, Hashable, CustomStringConvertible {
    /// What kind of failure this is; compare with the static members.
    public struct Code: Hashable, Sendable {
        private enum Base: Hashable, Sendable {
            case malformedEnvironment, notPassed, ambiguousName, alreadyAdopted, unusable
            case invalidAddress, bindFailed, storeFailed
            case lineTooLong, endedMidLine, notUTF8, timedOut, stopDeadlinePassed, closed, cancelled, failed
            case invalidName, missing, unreadable, tooLarge, invalid
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        // Socket activation (`ListeningSocket`, `ListenedFileDescriptor`).

        /// `LISTEN_PID`, `LISTEN_FDS` or `LISTEN_FDNAMES` is not what systemd sets.
        public static let malformedEnvironment = Self(.malformedEnvironment)
        /// systemd passed descriptors, but none under the requested name.
        public static let notPassed = Self(.notPassed)
        /// systemd passed several descriptors under the requested name.
        public static let ambiguousName = Self(.ambiguousName)
        /// The descriptor under this name was already adopted in this process.
        public static let alreadyAdopted = Self(.alreadyAdopted)
        /// The descriptor under this name cannot be a listening socket of the kind asked for; the
        /// message says why: it is not open in this process, not a socket (a FIFO, a file), not a
        /// stream socket (`ListenDatagram=`), not listening (a connection, as `Accept=yes`
        /// passes), or of the other address family (a Unix socket where the daemon listens on
        /// TCP, or the reverse) — each with the line of the `.socket` unit to change — or a call
        /// that checks it failed (``SystemdError/cause``).
        public static let unusable = Self(.unusable)
        /// The address to bind is not usable (not a numeric IP address, a path too long).
        public static let invalidAddress = Self(.invalidAddress)
        /// `socket`, `bind` or `listen` failed; ``SystemdError/cause`` says why.
        public static let bindFailed = Self(.bindFailed)
        /// Handing a socket or a snapshot to systemd's file-descriptor store failed (making,
        /// sealing or sending it with `FDSTORE=1`).
        public static let storeFailed = Self(.storeFailed)

        // Accepted connections (`Connection`).

        /// A line longer than the reader's `maximumBytes` (without its line break).
        public static let lineTooLong = Self(.lineTooLong)
        /// The peer closed its side in the middle of a line.
        package static let endedMidLine = Self(.endedMidLine)
        /// Bytes that are not UTF-8: a line (``Connection/readLine(maximumBytes:timeout:)``) or a
        /// credential read as text (``Credentials/readString(_:)``).
        public static let notUTF8 = Self(.notUTF8)
        /// The call's own `timeout` passed first.
        public static let timedOut = Self(.timedOut)
        /// The daemon is stopping and the deadline it handed the connection passed.
        public static let stopDeadlinePassed = Self(.stopDeadlinePassed)
        /// The connection was closed by this process.
        public static let closed = Self(.closed)
        /// The calling task was cancelled.
        package static let cancelled = Self(.cancelled)
        /// A system call on the connection failed (the peer reset it, say): ``SystemdError/cause``.
        package static let failed = Self(.failed)

        // Credentials and stored snapshots.

        /// The name is not one systemd can give a credential, or not a valid `FDNAME=`.
        package static let invalidName = Self(.invalidName)
        /// `CREDENTIALS_DIRECTORY` is unset or holds no credential of that name: the unit does
        /// not supply it.
        public static let missing = Self(.missing)
        /// The credential exists but is not a regular file, is too large, or cannot be read.
        package static let unreadable = Self(.unreadable)
        /// The snapshot is over ``StoredSnapshot/sizeLimit``.
        package static let tooLarge = Self(.tooLarge)
        /// What came back under the name is not a valid snapshot (or the socket-activation
        /// variables are malformed).
        package static let invalid = Self(.invalid)

        /// The code as the source spells it (`lineTooLong`), for the package's probes and tests.
        package var name: String { "\(base)" }
    }

    /// How ``description`` shows the ``cause``: each family of failures kept its own words.
    package enum CauseStyle: Hashable, Sendable {
        /// The message says it all.
        case none
        /// `message (reason, errno N)`: socket activation.
        case parenthesized
        /// `message: cause`: stored snapshots.
        case appended
    }

    /// What kind of failure this is.
    public let code: Code
    /// The credential's or the snapshot's name as asked for; `nil` for sockets and connections.
    package let name: String?
    /// What happened and what to do.
    public let message: String
    /// The failed system call underneath, when one failed: its `errno`, what it did and to what.
    public let cause: SystemError?
    private let causeStyle: CauseStyle

    /// The `errno` of the failed system call, when one failed.
    package var errno: Int32? { cause?.errno }

    package init(
        _ code: Code,
        name: String? = nil,
        _ message: String,
        cause: SystemError? = nil,
        causeStyle: CauseStyle = .none
    ) {
        self.code = code
        self.name = name
        self.message = message
        self.cause = cause
        self.causeStyle = causeStyle
    }

    /// A socket-activation failure: the description adds the failed call's reason and errno.
    package static func listeningSocket(_ code: Code, _ message: String, cause: SystemError? = nil) -> Self {
        Self(code, message, cause: cause, causeStyle: .parenthesized)
    }

    /// A stored-snapshot failure: the description adds the failed call.
    package static func snapshot(_ code: Code, name: String, _ message: String, cause: SystemError? = nil) -> Self {
        Self(code, name: name, message, cause: cause, causeStyle: .appended)
    }

    public var description: String {
        guard let cause else { return message }
        switch causeStyle {
        case .none: return message
        case .parenthesized: return "\(message) (\(cause.reason), errno \(cause.errno))"
        case .appended: return "\(message): \(cause)"
        }
    }
}
