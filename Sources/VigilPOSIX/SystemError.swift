import VigilPlatform

/// A system call that failed, or a file or directory refused for what it is: the OS's error
/// number, what was being done, to what, and why.
///
/// Vigil's one errno-carrying error: file access (`FileSystem`, trusted directories), the
/// service manager's notify socket and socket activation report a failed call with it, so a
/// caller matches ``errno`` and ``path`` rather than the message. A refusal that is no failed
/// call carries the nearest errno (`ELOOP` for a symbolic link, `EPERM` for a directory others
/// may write, `EFBIG` for a file over its limit) and says why in ``detail``.
///
/// The message reads `cannot <operation> <path>: <reason>`, e.g. `cannot read
/// /etc/vigild/vigild.json: it is a FIFO (named pipe), not a regular file`.
public struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The errno value, e.g. `ENOENT`.
    public let errno: Int32
    /// What was being done, as a verb that reads after "cannot": `read`, `create`,
    /// `rename /x.tmp to`, `send 'READY=1' to`.
    package let operation: String
    /// What it was done to: a path, or a socket's address.
    public let path: String
    /// Why, when the OS's words for ``errno`` would not say it ("it is a FIFO (named pipe), not
    /// a regular file"); `nil` for a plain OS failure.
    public let detail: String?

    public init(path: String, operation: String, errno: Int32, detail: String? = nil) {
        self.path = path
        self.operation = operation
        self.errno = errno
        self.detail = detail
    }

    /// A failed `open` with `O_NOFOLLOW` of `path`: `ELOOP` there means the last component is
    /// a symbolic link, and the detail says so (the OS's words, "Too many levels of symbolic
    /// links", would send the reader looking for a loop).
    package static func openingWithoutFollowing(_ path: String, operation: String, errno: Int32) -> Self {
        Self(path: path, operation: operation, errno: errno, detail: errno == ELOOP ? "it is a symbolic link" : nil)
    }

    /// The reason: ``detail``, else the OS's words for ``errno`` ("No such file or directory").
    package var reason: String { detail ?? Self.describe(errno) }

    /// `cannot <operation> <path>: <reason>`; a path over 256 characters is cut there and its
    /// length given (a path from outside may be huge; a message stays short).
    public var description: String {
        let shown = path.count > 256 ? String(path.prefix(256)) + "… (\(path.utf8.count) bytes)" : path
        return "cannot \(operation) \(shown): \(reason)"
    }

    /// The OS's words for an errno value, e.g. "Permission denied"; for `EMFILE` also what to do
    /// ("Too many open files (EMFILE): raise LimitNOFILE= …"). The corresponding C function is
    /// `strerror`.
    package static func describe(_ errno: Int32) -> String {
        let words = String(cString: strerror(errno))
        guard errno == EMFILE else { return words }
        var limit = rlimit()
        let soft = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? " of \(limit.rlim_cur)" : ""
        return words + " (EMFILE: the process reached its limit\(soft) descriptors, RLIMIT_NOFILE; "
            + "raise LimitNOFILE= in the unit, or ulimit -n)"
    }
}
