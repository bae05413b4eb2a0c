import CVigilMemoryFile
import VigilPOSIX
import VigilPlatform

/// A snapshot of state that systemd keeps for the service across a restart, without the disk:
/// the bytes go into a sealed memory file (`memfd_create`, then `F_SEAL_WRITE`, `F_SEAL_SHRINK`,
/// `F_SEAL_GROW` and `F_SEAL_SEAL`, so nobody can change them) that is handed to systemd's
/// file-descriptor store under a name (`FDSTORE=1`, `FDNAME=`); the next start gets it back
/// through `LISTEN_FDS` under that name.
///
/// ```swift
/// // at start, in a listener's start(context:)
/// if let bytes = try StoredSnapshot.restore(name: "cache") { cache = try Cache(decoding: bytes) }
/// // when the state is worth keeping (at terminate, say)
/// try StoredSnapshot.store(cache.encoded(), name: "cache")
/// ```
///
/// The unit needs `FileDescriptorStoreMax=` (at least the number of names stored, plus any
/// stored sockets) and must take notifications from the main process (`Type=notify`, or
/// `NotifyAccess=main`). systemd keeps the store across `systemctl restart` and restarts by
/// `Restart=`, and empties it at `systemctl stop` unless `FileDescriptorStorePreserve=yes`
/// (systemd 254 and later). A restored snapshot stays in the store until it is replaced
/// (``store(_:name:)`` removes the older one first) or removed (``remove(name:)``).
///
/// What comes back is validated like a state file: a regular file with all four seals, at most
/// 16 MiB (the state file's limit). Parsing and checking the bytes is the caller's, as for any state from
/// outside. Sends go through ``SystemdNotifier``: in order, never blocking the caller.
public enum StoredSnapshot {
    /// The largest snapshot stored or restored: 16 MiB, the state file's limit.
    package static let sizeLimit = FileSystem.stateLimit

    /// `F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE`.
    static let allSeals: Int32 = 0x1 | 0x2 | 0x4 | 0x8
    /// `F_ADD_SEALS` and `F_GET_SEALS` (Linux; Glibc declares them only under `_GNU_SOURCE`).
    static let addSeals: Int32 = 1033
    static let getSeals: Int32 = 1034

    /// Stores `bytes` in systemd's file-descriptor store under `name`, replacing what was
    /// stored under it (`FDSTOREREMOVE=1` first, then `FDSTORE=1` with the new sealed file).
    ///
    /// - Parameters:
    ///   - bytes: the snapshot, at most 16 MiB (the state file's limit).
    ///   - name: the `FDNAME=`: 1 to 255 printable ASCII characters, no `:`.
    /// - Returns: `false` when no service manager listens (`NOTIFY_SOCKET` unset): nothing was
    ///   stored.
    /// - Throws: ``SystemdError``: `invalidName`, `tooLarge`, or `storeFailed` (the
    ///   memory file could not be made or sealed, or the send failed; the cause says why).
    @discardableResult
    public static func store(_ bytes: [UInt8], name: String) throws(SystemdError) -> Bool {
        try validate(name)
        guard bytes.count <= sizeLimit else {
            throw SystemdError.snapshot(
                .tooLarge,
                name: name,
                "snapshot '\(name)' is \(FileSystem.describeSize(bytes.count)), over the limit of "
                    + FileSystem.describeSize(sizeLimit)
            )
        }
        guard SystemdNotifier().isEnabled else { return false }
        let file: Int32
        do {
            file = try makeSealedFile(bytes, name: name)
        } catch {
            throw SystemdError.snapshot(.storeFailed, name: name, "cannot make snapshot '\(name)'", cause: error)
        }
        defer { close(file) }
        do {
            try SystemdNotifier().send("FDSTOREREMOVE=1\nFDNAME=\(name)", passing: nil)
            return try SystemdNotifier().send("FDSTORE=1\nFDNAME=\(name)", passing: file)
        } catch {
            throw SystemdError.snapshot(
                .storeFailed,
                name: name,
                "cannot hand snapshot '\(name)' to systemd's file-descriptor store (FDSTORE=1)",
                cause: error
            )
        }
    }

    /// Removes what is stored under `name` (`FDSTOREREMOVE=1`), so that the next start gets no
    /// stale snapshot. Returns `false` when `NOTIFY_SOCKET` is unset.
    @discardableResult
    public static func remove(name: String) throws(SystemdError) -> Bool {
        try validate(name)
        do {
            return try SystemdNotifier().send("FDSTOREREMOVE=1\nFDNAME=\(name)", passing: nil)
        } catch {
            throw SystemdError.snapshot(.storeFailed, name: name, "cannot remove snapshot '\(name)'", cause: error)
        }
    }

    /// The snapshot systemd passed back under `name` (`LISTEN_FDS`, `LISTEN_FDNAMES`), read
    /// and closed; `nil` when none was passed (the first start, or after `systemctl stop`).
    ///
    /// - Important: Reads the socket-activation variables as `sd_listen_fds_with_names(3)`
    ///   does (and unsets them); a snapshot can be restored once per process.
    /// - Throws: ``SystemdError`` with code `invalid` when what came under `name` is not
    ///   a snapshot (not a regular file, not sealed, too large, unreadable); `invalidName`;
    ///   or the socket-activation error when the variables are malformed.
    public static func restore(name: String) throws(SystemdError) -> [UInt8]? {
        try validate(name)
        let passed: [ListenedFileDescriptor]
        do {
            passed = try SocketActivation.passed(unsetEnvironment: true)
        } catch {
            throw SystemdError.snapshot(.invalid, name: name, "cannot restore snapshot '\(name)': \(error)")
        }
        // The last one under the name: store() removes older ones, but a store from before may not have.
        guard let descriptor = passed.last(where: { $0.name == name })?.fileDescriptor,
            SocketActivation.markAdopted(descriptor)
        else { return nil }
        defer { close(descriptor) }
        return try read(descriptor, name: name)
    }

    /// The bytes of a passed snapshot file, validated.
    package static func read(_ descriptor: Int32, name: String) throws(SystemdError) -> [UInt8] {
        func invalid(_ why: String, errno code: Int32? = nil) -> SystemdError {
            SystemdError.snapshot(
                .invalid,
                name: name,
                "fd \(descriptor) '\(name)' is not a snapshot: \(why)",
                cause: code.map {
                    SystemError(path: "fd \(descriptor) '\(name)'", operation: "read the snapshot in", errno: $0)
                }
            )
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw invalid("fstat failed", errno: errno) }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG else { throw invalid("it is \(FileSystem.describeKind(kind)), not a sealed memory file") }
        let seals = fcntl(descriptor, getSeals)
        guard seals >= 0, seals & allSeals == allSeals else {
            throw invalid(
                seals < 0
                    ? "it cannot be sealed (not a memory file)"
                    : "it is not sealed against writing, shrinking and growing (seals 0x\(String(seals, radix: 16)))"
            )
        }
        guard Int64(info.st_size) <= Int64(sizeLimit) else {
            throw invalid("it is larger than the limit of \(FileSystem.describeSize(sizeLimit))")
        }
        guard lseek(descriptor, 0, SEEK_SET) == 0 else { throw invalid("lseek failed", errno: errno) }
        switch FileSystem.readAll(descriptor, limit: sizeLimit, expected: Int64(info.st_size)) {
        case .success(let bytes): return bytes
        case .failure(.tooLarge): throw invalid("it is larger than the limit of \(FileSystem.describeSize(sizeLimit))")
        case .failure(.system(let code)): throw invalid("read failed", errno: code)
        }
    }

    /// A close-on-exec memory file holding `bytes`, sealed unless `seal` is `false` (tests);
    /// the caller closes it.
    package static func makeSealedFile(_ bytes: [UInt8], name: String, seal: Bool = true) throws(SystemError) -> Int32 {
        let file = cvigil_memfd_create_sealable("vigil-snapshot")
        guard file >= 0 else {
            throw SystemError(path: "for snapshot '\(name)'", operation: "memfd_create", errno: errno)
        }
        if let failed = FileSystem.writeAll(bytes, to: file) {
            close(file)
            throw SystemError(path: "snapshot '\(name)'", operation: "write", errno: failed)
        }
        if seal && fcntl(file, addSeals, allSeals) != 0 {
            let code = errno
            close(file)
            throw SystemError(path: "snapshot '\(name)'", operation: "seal", errno: code)
        }
        return file
    }

    private static func validate(_ name: String) throws(SystemdError) {
        guard ListeningSocket.isValidStoreName(name) else {
            throw SystemdError.snapshot(
                .invalidName,
                name: name,
                "'\(StderrLogHandler.escaped(String(name.prefix(80))))' is no snapshot name: a name (FDNAME=) is 1 to 255 printable ASCII characters without ':'"
            )
        }
    }
}
