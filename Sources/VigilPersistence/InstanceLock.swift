import VigilPOSIX
import VigilPlatform

/// One daemon per directory: an exclusive `flock` on `<directory>/instance.lock`, held for the
/// life of the process, with the holder's pid written in the file.
///
/// Taken before anything else is written in the directory, so that a second daemon started on
/// the same state or runtime directory (by hand beside the service, say) fails at once naming
/// the pid that holds it, and touches nothing: before, it rewrote `status.json` (then `reload`
/// refused the live daemon) and both wrote the state file (the saved count went back).
///
/// `flock` locks belong to the open file description: they conflict between two opens in one
/// process too (as two daemons in one test process), are released by the kernel when the
/// process ends however it ends (no stale lock after `kill -9`), and are not inherited across
/// `exec` (the descriptor is close-on-exec).
package final class InstanceLock: Sendable {
    /// The lock file's name in the directory.
    package static let fileName = "instance.lock"

    /// The lock file, for messages.
    package let path: String
    private let descriptor: Int32
    /// The lock file's device and inode: two directories that are one share one lock.
    package let identity: [UInt64]

    /// Takes the lock in the directory open at `directory` (`path` names it in messages; a lock
    /// file this call creates is given to `owner` when the caller is root, so the daemon's own
    /// user can take it later).
    ///
    /// - Throws: `SystemError` with `EWOULDBLOCK` naming the pid that holds the lock, or the
    ///   failure to open or lock the file.
    package init(directory: Int32, path directoryPath: String, owner: uid_t) throws(SystemError) {
        let path = directoryPath + "/" + Self.fileName
        self.path = path
        let flags = O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        var file = openat(directory, Self.fileName, O_RDWR | flags, 0o600)
        // A file made by another user (root's run by hand in a DynamicUser's directory): a lock
        // needs no write access, only the pid is then not recorded.
        if file < 0 && errno == EACCES { file = openat(directory, Self.fileName, O_RDONLY | flags) }
        guard file >= 0 else {
            throw SystemError.openingWithoutFollowing(path, operation: "open the lock file", errno: errno)
        }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            let kind = FileSystem.describeKind(info.st_mode & S_IFMT)
            close(file)
            throw SystemError(path: path, operation: "lock", errno: EINVAL, detail: "it is \(kind), not a regular file")
        }
        // A hard link planted by the directory's owner would have root truncate, write and
        // chown the file it links to (another file in the same file system: /etc/shadow where
        // fs.protected_hardlinks is off). The lock file is this directory's own, one name only.
        guard info.st_nlink == 1 else {
            close(file)
            throw SystemError(
                path: path,
                operation: "lock",
                errno: EMLINK,
                detail: "it has \(info.st_nlink) hard links, so it may be another file's: "
                    + "remove it (a lock file is made anew), then start again"
            )
        }
        guard flock(file, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            defer { close(file) }
            guard code == EWOULDBLOCK else { throw SystemError(path: path, operation: "lock", errno: code) }
            let holder = Self.describeHolder(recorded: Self.recordedPID(file), info: info)
            throw SystemError(
                path: path,
                operation: "lock",
                errno: code,
                detail: "\(holder) holds it: another daemon runs on \(directoryPath). "
                    + "Stop that one first, or give this one other directories"
            )
        }
        descriptor = file
        identity = [UInt64(info.st_dev), UInt64(info.st_ino)]
        // Ours now: record who holds it. The mode and owner are set whatever the umask, and
        // the file made by root goes to the directory's owner.
        if info.st_uid == geteuid() { fchmod(file, 0o600) }
        if geteuid() == 0 && info.st_uid != owner { fchown(file, owner, gid_t(bitPattern: -1)) }
        let text = Array("\(getpid())\n".utf8)
        if ftruncate(file, 0) == 0 {
            _ = text.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) }
        }
    }

    /// Takes the lock in the directory at `path` (a symbolic link to it is followed: the state
    /// directory's owner rule is ``StateStore/checkOwnership(of:)``'s, checked before).
    ///
    /// - Parameter held: a lock this process holds already; when the directory's lock file is
    ///   that one (the same directory by another name), it is returned as it is.
    package static func acquire(
        inDirectoryAt path: String,
        held: InstanceLock? = nil
    ) throws(SystemError)
        -> InstanceLock
    {
        let directory = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw SystemError(path: path, operation: "open directory", errno: errno) }
        defer { close(directory) }
        var info = stat()
        guard fstat(directory, &info) == 0 else { throw SystemError(path: path, operation: "use", errno: errno) }
        if let held {
            var file = stat()
            if fstatat(directory, fileName, &file, AT_SYMLINK_NOFOLLOW) == 0,
                held.identity == [UInt64(file.st_dev), UInt64(file.st_ino)]
            {
                return held
            }
        }
        return try InstanceLock(directory: directory, path: path, owner: info.st_uid)
    }

    deinit { close(descriptor) }

    /// The pid in the lock file (its first line, digits only), or `nil`.
    /// The holder for the message: its pid here, as `/proc/locks` shows it, and the pid it
    /// wrote in the file when that differs (a daemon in a PID namespace of its own writes its
    /// own pid there: 1, say, which here is init).
    private static func describeHolder(recorded: Int32?, info: stat) -> String {
        let visible = (try? FileSystem.read("/proc/locks", limit: 1 << 20)).map {
            InstanceLockHolder.holders(
                in: String(decoding: $0, as: UTF8.self),
                device: UInt64(info.st_dev),
                inode: UInt64(info.st_ino)
            )
        }
        // One holder; 0 when it is not visible from here. `/proc/locks` may be hidden
        // (ProcSubset=pid): then the file's pid is all there is.
        let here = visible?.count == 1 ? visible?.first : nil
        switch (here, recorded) {
        case (let here?, let recorded?) where here > 0 && here != recorded:
            return "pid \(here) (pid \(recorded) in its own PID namespace)"
        case (let here?, _) where here > 0:
            return "pid \(here)"
        case (0?, let recorded?):
            return "pid \(recorded) of another PID namespace"
        case (_, let recorded?):
            return "pid \(recorded)"
        case (_, nil):
            return "another process (its pid is not recorded yet)"
        }
    }

    private static func recordedPID(_ file: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 24)
        let count = buffer.withUnsafeMutableBytes { pread(file, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let line = buffer[..<count].prefix { $0 != UInt8(ascii: "\n") }
        guard !line.isEmpty, line.count <= 10, line.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int32(String(decoding: line, as: UTF8.self)).flatMap { $0 > 0 ? $0 : nil }
    }
}
