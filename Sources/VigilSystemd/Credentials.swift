import VigilPOSIX
import VigilPlatform

/// The credentials systemd hands a service in `$CREDENTIALS_DIRECTORY` (systemd 247 and later):
/// secrets and settings the unit supplies with `LoadCredential=NAME:PATH`,
/// `LoadCredentialEncrypted=NAME:PATH` (made with `systemd-creds encrypt`, 250 and later) or
/// `SetCredential=NAME:VALUE`, readable by the service's own user only, also under
/// `DynamicUser=yes`, and never in its environment or on its command line.
///
/// ```swift
/// let token = try Credentials.readString("api-token")   // LoadCredential=api-token:/etc/mydaemon/token
/// ```
///
/// A credential is read under the rules of a configuration file: a regular file (no FIFO,
/// device or directory, refused without blocking: the open is non-blocking), at most
/// ``sizeLimit`` bytes (systemd's own cap for a credential). A missing credential is an error
/// that names it and the unit lines that supply it.
public struct Credentials: Sendable, Hashable {
    /// The largest credential read: 1 MiB, systemd's `CREDENTIAL_SIZE_MAX`.
    public static let sizeLimit = 1 << 20

    /// The directory credentials are read from; `nil` when `CREDENTIALS_DIRECTORY` is unset
    /// (not under systemd, or the unit supplies none).
    public let directory: String?

    /// Credentials in `directory` (tests, or a daemon run by hand with a directory of its own).
    public init(directory: String?) {
        self.directory = directory
    }

    /// The credentials of this process: `CREDENTIALS_DIRECTORY` as systemd set it.
    ///
    /// - Important: Reads the process's environment.
    public static func current() -> Credentials {
        Credentials(directory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
    }

    /// The bytes of the credential `name` in this process's `CREDENTIALS_DIRECTORY`.
    ///
    /// - Throws: ``CredentialError`` (see ``read(_:)``).
    public static func read(_ name: String) throws(CredentialError) -> [UInt8] {
        try current().read(name)
    }

    /// The credential `name` in this process's `CREDENTIALS_DIRECTORY` as text (see
    /// ``readString(_:)``).
    public static func readString(_ name: String) throws(CredentialError) -> String {
        try current().readString(name)
    }

    /// The bytes of the credential `name`, exactly as the unit supplied them.
    ///
    /// - Throws: ``CredentialError``: ``CredentialError/Code/invalidName`` for a name systemd
    ///   could not have given (empty, `.`, `..`, a `/`, a NUL, over 255 bytes);
    ///   ``CredentialError/Code/missing`` when `CREDENTIALS_DIRECTORY` is unset or has no such
    ///   file, saying which unit line supplies it; ``CredentialError/Code/unreadable`` when it
    ///   is not a regular file, over ``sizeLimit``, or the read fails (the ``CredentialError/cause``
    ///   says why).
    public func read(_ name: String) throws(CredentialError) -> [UInt8] {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, name != ".", name != "..",
            !bytes.contains(UInt8(ascii: "/")), !bytes.contains(0)
        else {
            throw CredentialError(
                .invalidName,
                name: name,
                "'\(StderrLogHandler.escaped(String(name.prefix(64))))' is no credential name: a name is 1 to 255 "
                    + "bytes, not '.' or '..', without '/' (as in LoadCredential=NAME:PATH)"
            )
        }
        // The name may hold control characters; messages show it escaped.
        let shown = StderrLogHandler.escaped(name)
        guard let directory, !directory.isEmpty else {
            throw CredentialError(
                .missing,
                name: name,
                "credential '\(shown)' is missing: CREDENTIALS_DIRECTORY is not set, so the service manager "
                    + "supplied no credentials; \(Self.supply(shown))"
            )
        }
        guard directory.hasPrefix("/") else {
            throw CredentialError(
                .unreadable,
                name: name,
                "cannot read credential '\(shown)': CREDENTIALS_DIRECTORY='\(StderrLogHandler.escaped(String(directory.prefix(80))))' "
                    + "is not an absolute path (systemd sets /run/credentials/UNIT)"
            )
        }
        let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
        do {
            return try FileSystem.read(path, limit: Self.sizeLimit)
        } catch {
            if error.errno == ENOENT && error.detail == nil {
                throw CredentialError(
                    .missing,
                    name: name,
                    "credential '\(shown)' is missing: \(StderrLogHandler.escaped(path)) does not exist; "
                        + Self.supply(shown),
                    cause: error
                )
            }
            throw CredentialError(.unreadable, name: name, "cannot read credential '\(shown)': \(error)", cause: error)
        }
    }

    /// The credential `name` as UTF-8 text, without one trailing newline (`echo secret >
    /// file` writes one; a value with two keeps the first).
    ///
    /// - Throws: as ``read(_:)-method``, and ``CredentialError/Code/notText`` for bytes that are not
    ///   UTF-8.
    public func readString(_ name: String) throws(CredentialError) -> String {
        var bytes = try read(name)
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CredentialError(
                .notText,
                name: name,
                "credential '\(StderrLogHandler.escaped(name))' is not UTF-8 text; read it as bytes with Credentials.read(_:)"
            )
        }
        return text
    }

    /// What to add to the unit.
    private static func supply(_ name: String) -> String {
        "supply it in the service's unit with LoadCredential=\(name):/path/to/file, "
            + "LoadCredentialEncrypted=\(name):/path/to/file.cred (made by systemd-creds encrypt) "
            + "or SetCredential=\(name):VALUE"
    }
}

/// Reading a credential failed: which one, why, and what to change.
public struct CredentialError: Error, Hashable, CustomStringConvertible {
    /// What kind of failure this is; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case invalidName
            case missing
            case unreadable
            case notText
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The name is not one systemd can give a credential.
        public static let invalidName = Self(.invalidName)
        /// `CREDENTIALS_DIRECTORY` is unset or holds no credential of that name: the unit does
        /// not supply it.
        public static let missing = Self(.missing)
        /// The credential exists but is not a regular file, is too large, or cannot be read.
        public static let unreadable = Self(.unreadable)
        /// ``Credentials/readString(_:)-method`` found bytes that are not UTF-8.
        public static let notText = Self(.notText)

        public var description: String { "\(base)" }
    }

    /// What kind of failure this is.
    public let code: Code
    /// The credential's name as asked for.
    public let name: String
    /// What happened and what to do, e.g. "credential 'api-token' is missing: … supply it in the
    /// service's unit with LoadCredential=api-token:/path/to/file, …".
    public let message: String
    /// The failed system call underneath, when one failed.
    public let cause: SystemError?

    /// The `errno` of the failed system call, when one failed.
    public var errno: Int32? { cause?.errno }

    init(_ code: Code, name: String, _ message: String, cause: SystemError? = nil) {
        self.code = code
        self.name = name
        self.message = message
        self.cause = cause
    }

    public var description: String { message }
}
