import VigilPOSIX
import VigilPlatform

/// Getting a listening socket failed: what systemd passed is unusable, or binding failed.
///
/// The ``message`` names the descriptor (`fd 3 'http'`) or the address, says what is wrong and
/// what to change — usually a line of the `.socket` unit.
public struct ListeningSocketError: Error, Hashable, CustomStringConvertible {
    /// What kind of failure this is; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case malformedEnvironment
            case notPassed
            case ambiguousName
            case alreadyAdopted
            case notOpen
            case notASocket
            case notAStreamSocket
            case notListening
            case wrongFamily
            case invalidAddress
            case bindFailed
            case storeFailed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// `LISTEN_PID`, `LISTEN_FDS` or `LISTEN_FDNAMES` is not what systemd sets.
        public static let malformedEnvironment = Self(.malformedEnvironment)
        /// systemd passed descriptors, but none under the requested name.
        public static let notPassed = Self(.notPassed)
        /// systemd passed several descriptors under the requested name.
        public static let ambiguousName = Self(.ambiguousName)
        /// The descriptor under this name was already adopted in this process.
        public static let alreadyAdopted = Self(.alreadyAdopted)
        /// The descriptor announced is not open in this process.
        public static let notOpen = Self(.notOpen)
        /// The descriptor is not a socket (a pipe, a file, …).
        public static let notASocket = Self(.notASocket)
        /// The socket is not a stream socket (`ListenDatagram=`, `ListenSequentialPacket=`).
        public static let notAStreamSocket = Self(.notAStreamSocket)
        /// The stream socket is not listening (a connection, as `Accept=yes` passes).
        public static let notListening = Self(.notListening)
        /// The socket's address family does not match the address asked for (TCP or Unix).
        public static let wrongFamily = Self(.wrongFamily)
        /// The address to bind is not usable (not a numeric IP address, a path too long).
        public static let invalidAddress = Self(.invalidAddress)
        /// `socket`, `bind` or `listen` failed; ``ListeningSocketError/errno`` says why.
        public static let bindFailed = Self(.bindFailed)
        /// Handing the socket to systemd's file-descriptor store failed (an invalid name, or
        /// sending `FDSTORE=1` to `NOTIFY_SOCKET` failed).
        public static let storeFailed = Self(.storeFailed)

        public var description: String { "\(base)" }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened and what to do.
    public let message: String
    /// The failed system call underneath, when one failed: its `errno`, what it did and to what.
    public let cause: SystemError?

    /// The `errno` of the failed system call, when one failed.
    public var errno: Int32? { cause?.errno }

    init(_ code: Code, _ message: String, cause: SystemError? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        guard let cause else { return message }
        return "\(message) (\(cause.reason), errno \(cause.errno))"
    }
}
