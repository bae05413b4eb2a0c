import CVigilSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One file descriptor passed by socket activation (`sd_listen_fds_with_names(3)`).
public struct ListenedFileDescriptor: Sendable, Hashable {
    /// The descriptor, already open in this process (from 3 upwards).
    public let fileDescriptor: Int32
    /// Its `FileDescriptorName=` (default: the socket unit's name).
    public let name: String
}

extension ListenedFileDescriptor {
    /// The descriptors systemd passed to this process, in order; empty when none.
    ///
    /// The corresponding C function is `sd_listen_fds_with_names`. It checks `LISTEN_PID`, and
    /// with `unsetEnvironment` it removes `LISTEN_FDS`, `LISTEN_PID` and `LISTEN_FDNAMES` so
    /// children do not inherit them (it never touches `NOTIFY_SOCKET`).
    ///
    /// - Throws: ``SystemdError`` when the variables are malformed.
    public static func adopt(unsetEnvironment: Bool = true) throws -> [ListenedFileDescriptor] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(unsetEnvironment ? 1 : 0, &names)
        guard count >= 0 else {
            throw SystemdError(errno: -count, "LISTEN_FDS/LISTEN_FDNAMES from the service manager are malformed")
        }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        // `start + index` cannot overflow: libsystemd refuses a LISTEN_FDS above
        // INT_MAX - SD_LISTEN_FDS_START (-EINVAL, thrown above).
        let start = cvigil_listen_fds_start()
        return (0..<count).map { index in
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            return ListenedFileDescriptor(fileDescriptor: start + index, name: name)
        }
    }
}
