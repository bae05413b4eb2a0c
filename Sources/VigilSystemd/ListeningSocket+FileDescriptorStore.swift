import VigilPOSIX
import VigilPlatform

extension ListeningSocket {
    /// Hands the socket to systemd's file-descriptor store under `name`, so that it stays open
    /// and keeps queueing connections while the service restarts; the next start gets it back
    /// through `LISTEN_FDS` under that name, where ``init(name:orBind:backlog:)`` adopts it. A
    /// daemon without a `.socket` unit thereby loses no connection across `systemctl restart`.
    ///
    /// Sends `FDSTORE=1` and `FDNAME=<name>` with the descriptor (what `sd_pid_notify_with_fds(3)` does), through ``SystemdNotifier``: in order after
    /// notifications that wait for systemd, and never blocking the caller.
    /// The unit needs `FileDescriptorStoreMax=` (at least the number of stored sockets; the
    /// default 0 makes systemd drop them with a warning in its own log) and must accept
    /// notifications from the main process (`Type=notify`, or `NotifyAccess=main`). systemd
    /// ignores a descriptor it already holds, so storing an adopted socket again is harmless.
    /// The store is kept across `systemctl restart` and restarts by `Restart=`, and emptied by
    /// `systemctl stop` (unless `FileDescriptorStorePreserve=yes`, systemd 254 and later).
    ///
    /// - Parameter name: the `FDNAME=`: 1 to 255 printable ASCII characters, no `:`. Use the
    ///   name given to ``init(name:orBind:backlog:)``.
    /// - Returns: `false` when no service manager listens (`NOTIFY_SOCKET` unset): nothing was
    ///   stored.
    /// - Throws: ``SystemdError`` with code `storeFailed` for an invalid name or when
    ///   sending failed.
    @discardableResult
    public func storeInServiceManager(name: String) throws(SystemdError) -> Bool {
        guard Self.isValidStoreName(name) else {
            throw SystemdError.listeningSocket(
                .storeFailed,
                "cannot store fd \(fileDescriptor) under FDNAME='\(name.prefix(80))': a name is 1 to 255 printable ASCII characters without ':'"
            )
        }
        do {
            return try SystemdNotifier().send("FDSTORE=1\nFDNAME=\(name)", passing: fileDescriptor)
        } catch {
            throw SystemdError.listeningSocket(
                .storeFailed,
                "cannot hand fd \(fileDescriptor) '\(name)' to systemd's file-descriptor store (FDSTORE=1) "
                    + "through NOTIFY_SOCKET \(error.path)",
                cause: error
            )
        }
    }
}

extension ListeningSocket {
    /// Whether `name` can be an `FDNAME=`: 1 to 255 printable ASCII characters, no `:` (the
    /// separator of `LISTEN_FDNAMES`).
    static func isValidStoreName(_ name: String) -> Bool {
        (1...255).contains(name.utf8.count)
            && name.utf8.allSatisfy { (0x20...0x7e).contains($0) && $0 != UInt8(ascii: ":") }
    }
}
