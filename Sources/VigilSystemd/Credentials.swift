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
/// `sizeLimit` bytes (systemd's own cap for a credential). A missing credential is an error
/// that names it and the unit lines that supply it.
public struct Credentials: Sendable, Hashable {
    /// The largest credential read: 1 MiB, systemd's `CREDENTIAL_SIZE_MAX`.
    package static let sizeLimit = 1 << 20

    /// The directory credentials are read from; `nil` when `CREDENTIALS_DIRECTORY` is unset
    /// (not under systemd, or the unit supplies none).
    package let directory: String?

    /// Credentials in `directory` (tests, or a daemon run by hand with a directory of its own).
    package init(directory: String?) {
        self.directory = directory
    }

    /// The credentials of this process: `CREDENTIALS_DIRECTORY` as systemd set it.
    ///
    /// - Important: Reads the process's environment.
    package static func current() -> Credentials {
        Credentials(directory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
    }

    /// The bytes of the credential `name` in this process's `CREDENTIALS_DIRECTORY`.
    ///
    /// - Throws: ``SystemdError`` (see ``read(_:)``).
    public static func read(_ name: String) throws(SystemdError) -> [UInt8] {
        try current().read(name)
    }

    /// The credential `name` in this process's `CREDENTIALS_DIRECTORY` as text (see
    /// ``readString(_:)``).
    public static func readString(_ name: String) throws(SystemdError) -> String {
        try current().readString(name)
    }

    /// The bytes of the credential `name`, exactly as the unit supplied them.
    ///
    /// - Throws: ``SystemdError``: ``SystemdError/Code/invalidName`` for a name systemd
    ///   could not have given (empty, `.`, `..`, a `/`, a NUL, over 255 bytes);
    ///   ``SystemdError/Code/missing`` when `CREDENTIALS_DIRECTORY` is unset or has no such
    ///   file, saying which unit line supplies it; ``SystemdError/Code/unreadable`` when it
    ///   is not a regular file, over `sizeLimit`, or the read fails (the ``SystemdError/cause``
    ///   says why).
    package func read(_ name: String) throws(SystemdError) -> [UInt8] {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, name != ".", name != "..",
            !bytes.contains(UInt8(ascii: "/")), !bytes.contains(0)
        else {
            throw SystemdError(
                .invalidName,
                name: name,
                "'\(StderrLogHandler.escaped(String(name.prefix(64))))' is no credential name: a name is 1 to 255 "
                    + "bytes, not '.' or '..', without '/' (as in LoadCredential=NAME:PATH)"
            )
        }
        // The name may hold control characters; messages show it escaped.
        let shown = StderrLogHandler.escaped(name)
        guard let directory, !directory.isEmpty else {
            throw SystemdError(
                .missing,
                name: name,
                "credential '\(shown)' is missing: CREDENTIALS_DIRECTORY is not set, so the service manager "
                    + "supplied no credentials; \(Self.supply(shown))"
            )
        }
        guard directory.hasPrefix("/") else {
            throw SystemdError(
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
                throw SystemdError(
                    .missing,
                    name: name,
                    "credential '\(shown)' is missing: \(StderrLogHandler.escaped(path)) does not exist; "
                        + Self.supply(shown),
                    cause: error
                )
            }
            throw SystemdError(.unreadable, name: name, "cannot read credential '\(shown)': \(error)", cause: error)
        }
    }

    /// The credential `name` as UTF-8 text, without one trailing newline (`echo secret >
    /// file` writes one; a value with two keeps the first).
    ///
    /// - Throws: as ``read(_:)-method``, and ``SystemdError/Code/notUTF8`` for bytes that are not
    ///   UTF-8.
    package func readString(_ name: String) throws(SystemdError) -> String {
        var bytes = try read(name)
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw SystemdError(
                .notUTF8,
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
