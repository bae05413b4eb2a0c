import VigilPOSIX
import VigilPlatform

/// A directory that is safe to read and write files in, held open by descriptor: every file
/// operation goes through that descriptor (`openat`, `renameat`), so swapping a path component
/// after the check changes nothing.
///
/// The rule (checked on the opened descriptor with `fstat`, never on a path):
///
/// 1. The directory itself is not a symbolic link, and not writable by group or others.
/// 2. It is owned by the caller (effective uid) or by root — **or**, for a daemon's runtime
///    directory that systemd created for a `DynamicUser=` (`/run/vigild`, owned by that uid,
///    mode 0755), by another uid when every directory above it (followed through `..` up to
///    `/`, so symbolic links on the way do not matter) is owned by root or the caller and is not
///    writable by group or others. Nobody else can then have made it or can replace it: a
///    directory in `/tmp` (world-writable) owned by another user is refused.
/// 3. With `privateToCaller` (the last-resort directory in `/tmp`), it must be owned by the
///    caller and have no group or other permissions at all (mode 0700).
///
/// Files in it are read only when they are regular files owned by the directory's owner or
/// root, no larger than a limit, opened with `O_NOFOLLOW | O_NONBLOCK` (a FIFO cannot block
/// the reader); files are written through a temporary created with `O_EXCL | O_NOFOLLOW`, so a
/// planted symbolic link is never written through.
package final class TrustedDirectory: Sendable {
    /// The path as given, for messages.
    package let path: String
    /// The owner of the directory, as `fstat` saw it.
    package let owner: uid_t
    private let descriptor: Int32

    private init(path: String, descriptor: Int32, owner: uid_t) {
        self.path = path
        self.descriptor = descriptor
        self.owner = owner
    }

    deinit { close(descriptor) }

    /// Opens and checks an existing directory.
    ///
    /// - Parameter privateToCaller: also require ownership by the caller and mode 0700.
    package static func open(
        _ path: String,
        privateToCaller: Bool = false
    ) throws(SystemError)
        -> TrustedDirectory
    {
        var descriptor = SystemCall.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if descriptor < 0, !privateToCaller, let target = systemdPrivateTarget(of: path) {
            // `DynamicUser=` with `RuntimeDirectoryPreserve=` (or `StateDirectory=`): systemd's
            // link to `private/<name>`, checked like the directory itself below.
            descriptor = SystemCall.open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
        guard descriptor >= 0 else {
            let error = errno
            // O_NOFOLLOW on a symbolic link gives ELOOP (ENOTDIR with O_DIRECTORY on some kernels).
            var link = stat()
            if lstat(path, &link) == 0 && (link.st_mode & S_IFMT) == S_IFLNK {
                throw SystemError(
                    path: path,
                    operation: "use",
                    errno: ELOOP,
                    detail: "it is a symbolic link, and not one systemd made for DynamicUser= "
                        + "(owned by root, in a directory only root may write, to private/<name> beside it)"
                )
            }
            // Another user's directory we may not even open (mode 0700): say whose it is.
            let caller = geteuid()
            if error == EACCES && lstat(path, &link) == 0 && link.st_uid != caller && link.st_uid != 0 {
                let whom = privateToCaller ? "you (uid \(caller))" : "you or root"
                let detail = "it is owned by uid \(link.st_uid), not by \(whom)"
                throw SystemError(path: path, operation: "use", errno: error, detail: detail)
            }
            throw SystemError(path: path, operation: "use", errno: error)
        }
        do {
            let owner = try check(descriptor, path: path, privateToCaller: privateToCaller)
            return TrustedDirectory(path: path, descriptor: descriptor, owner: owner)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// The directory a symbolic link made by systemd for `DynamicUser=` leads to, or `nil` when
    /// `path` is no such link. systemd makes `/run/<name>` (with `RuntimeDirectoryPreserve=`)
    /// and `/var/lib/<name>` links to `private/<name>` beside them: the link is owned by root,
    /// in a directory owned by root that nobody else may write, and reads `private/<name>`
    /// (or that path in full). Only root can have made such a link, so what it leads to is as
    /// trustworthy as a directory in its place; the target is then checked like any other.
    static func systemdPrivateTarget(of path: String) -> String? {
        var link = stat()
        guard lstat(path, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK, link.st_uid == 0 else { return nil }
        let parent = FileSystem.parent(of: path)
        // By bytes, as `parent` is: both halves of the path split at the same slash.
        let name = FileSystem.components(of: path, omittingEmpty: false).last ?? ""
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        var directory = stat()
        guard stat(parent, &directory) == 0, directory.st_uid == 0, directory.st_mode & 0o022 == 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: 4097)
        let count = readlink(path, &buffer, 4096)
        guard count > 0 else { return nil }
        let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let expected = (parent == "/" ? "" : parent) + "/private/" + name
        guard target == "private/" + name || target == expected else { return nil }
        // `private` itself must be root's and closed to others, as systemd makes it (0700).
        var privateDirectory = stat()
        let privatePath = (parent == "/" ? "" : parent) + "/private"
        guard lstat(privatePath, &privateDirectory) == 0, (privateDirectory.st_mode & S_IFMT) == S_IFDIR,
            privateDirectory.st_uid == 0, privateDirectory.st_mode & 0o022 == 0
        else { return nil }
        return expected
    }

    /// Creates the directory (and missing parents, mode 0700) when it does not exist, then
    /// opens and checks it like ``open(_:privateToCaller:)``. Its path must follow
    /// ``DirectoryPathRule`` (checked before anything is made, and on each directory made): a
    /// link on the way that another user made would have the caller make the directory, and
    /// write in it, where that user chose.
    package static func create(
        _ path: String,
        privateToCaller: Bool = false
    ) throws(SystemError)
        -> TrustedDirectory
    {
        try DirectoryPathRule.create(path, role: .runtime)
        return try open(path, privateToCaller: privateToCaller)
    }

    private static func check(
        _ descriptor: Int32,
        path: String,
        privateToCaller: Bool
    ) throws(SystemError)
        -> uid_t
    {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw SystemError(path: path, operation: "use", errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw SystemError(path: path, operation: "use", errno: ENOTDIR, detail: "it is not a directory")
        }
        let caller = geteuid()
        if privateToCaller {
            guard info.st_uid == caller else {
                throw refusal(path, "it is owned by uid \(info.st_uid), not by you (uid \(caller))")
            }
            guard info.st_mode & 0o077 == 0 else {
                throw refusal(path, "it has mode \(octal(info.st_mode & 0o7777)), not 0700")
            }
        }
        guard info.st_mode & 0o022 == 0 else {
            throw refusal(path, "it is writable by group or others (mode \(octal(info.st_mode & 0o7777)))")
        }
        if info.st_uid == caller || info.st_uid == 0 { return info.st_uid }
        // Another uid's directory (a DynamicUser's runtime directory): only if nobody but root or
        // the caller could have created or replaced it.
        if let parent = try untrustedAncestor(of: descriptor, path: path) {
            throw refusal(path, "it is owned by uid \(info.st_uid), not by you or root, and \(parent)")
        }
        return info.st_uid
    }

    /// The first directory above `descriptor` that is not owned by root or the caller or is
    /// writable by group or others, described; `nil` when the whole chain up to `/` is trusted.
    private static func untrustedAncestor(of descriptor: Int32, path: String) throws(SystemError) -> String? {
        let caller = geteuid()
        var current = dup(descriptor)
        guard current >= 0 else { throw SystemError(path: path, operation: "use", errno: errno) }
        defer { close(current) }
        var name = FileSystem.parent(of: path)
        var here = stat()
        guard fstat(current, &here) == 0 else { throw SystemError(path: path, operation: "use", errno: errno) }
        // A path is at most a few thousand levels deep; the bound only guards against a loop.
        for _ in 0..<4096 {
            let parent = openat(current, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard parent >= 0 else { throw SystemError(path: name, operation: "check", errno: errno) }
            close(current)
            current = parent
            var info = stat()
            guard fstat(parent, &info) == 0 else { throw SystemError(path: name, operation: "check", errno: errno) }
            if info.st_dev == here.st_dev && info.st_ino == here.st_ino { return nil }  // reached `/`
            if info.st_uid != 0 && info.st_uid != caller {
                return "its parent \(name) is owned by uid \(info.st_uid)"
            }
            if info.st_mode & 0o022 != 0 {
                return "its parent \(name) is writable by group or others (mode \(octal(info.st_mode & 0o7777)))"
            }
            here = info
            name = FileSystem.parent(of: name)
        }
        return "its parent chain is too deep"
    }

    /// A directory refused by the rule: `EPERM`, with why.
    private static func refusal(_ path: String, _ why: String) -> SystemError {
        SystemError(path: path, operation: "use", errno: EPERM, detail: why)
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// Takes this directory's ``InstanceLock``: one daemon per directory.
    package func lockInstance() throws(SystemError) -> InstanceLock {
        try InstanceLock(directory: descriptor, path: path, owner: owner)
    }

    /// The path of `name` in this directory, for messages.
    package func path(of name: String) -> String { path + "/" + name }

    /// Reads the regular file `name`: opened with `O_NOFOLLOW | O_NONBLOCK`, refused unless it
    /// is a regular file owned by the directory's owner or root and at most `limit` bytes.
    package func read(_ name: String, limit: Int = 1 << 20) throws(SystemError) -> [UInt8] {
        let file = openat(descriptor, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else {
            throw SystemError.openingWithoutFollowing(path(of: name), operation: "read", errno: errno)
        }
        defer { close(file) }
        func refused(_ errno: Int32, _ detail: String) -> SystemError {
            SystemError(path: path(of: name), operation: "read", errno: errno, detail: detail)
        }
        var info = stat()
        guard fstat(file, &info) == 0 else { throw SystemError(path: path(of: name), operation: "read", errno: errno) }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG else {
            throw refused(EINVAL, "it is \(FileSystem.describeKind(kind)), not a regular file")
        }
        guard info.st_uid == owner || info.st_uid == 0 else {
            throw refused(
                EPERM,
                "it is owned by uid \(info.st_uid), not by the directory's owner (uid \(owner)) or root"
            )
        }
        guard info.st_size <= limit else {
            throw refused(EFBIG, "it is \(info.st_size) bytes, more than the \(limit) this file may have")
        }
        switch FileSystem.readAll(file, limit: limit, expected: Int64(info.st_size)) {
        case .success(let bytes): return bytes
        case .failure(.system(let code)): throw SystemError(path: path(of: name), operation: "read", errno: code)
        case .failure(.tooLarge):
            // The file grew since the fstat.
            throw refused(EFBIG, "it grew beyond the \(limit) bytes this file may have")
        }
    }

    /// Replaces `name` with `bytes` atomically: a temporary `<name>.tmp` created with
    /// `O_CREAT | O_EXCL | O_NOFOLLOW` (whatever was there, a stale file or a symbolic link, is
    /// unlinked, never followed), then `renameat` over `name`. No `fsync`: for runtime files on
    /// tmpfs.
    package func writeAtomically(_ bytes: [UInt8], to name: String, mode: mode_t = 0o600) throws(SystemError) {
        let temporary = name + ".tmp"
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        let temporaryPath = path(of: temporary)
        func create() -> Int32 {
            SystemCall.retrying32(.open, .path(temporaryPath)) { openat(descriptor, temporary, flags, mode) }
        }
        var file = create()
        if file < 0 && errno == EEXIST {
            // Left over from a crash, or planted: remove the entry itself (unlinkat never follows).
            unlinkat(descriptor, temporary, 0)
            file = create()
        }
        guard file >= 0 else { throw SystemError(path: temporaryPath, operation: "create", errno: errno) }
        // The mode asked for, whatever the umask.
        let failure: (operation: String, errno: Int32)? =
            SystemCall.retrying32(.fchmod, .path(temporaryPath), { fchmod(file, mode) }) == 0
            ? FileSystem.writeAll(bytes, to: file, subject: .path(temporaryPath)).map { ("write", $0) }
            : ("set the mode of", errno)
        close(file)
        if let failure {
            unlinkat(descriptor, temporary, 0)
            throw SystemError(path: temporaryPath, operation: failure.operation, errno: failure.errno)
        }
        let renamed = SystemCall.retrying32(.rename, .path(path(of: name))) {
            renameat(descriptor, temporary, descriptor, name)
        }
        guard renamed == 0 else {
            let error = errno
            unlinkat(descriptor, temporary, 0)
            throw SystemError(path: path(of: name), operation: "rename \(temporary) to", errno: error)
        }
    }
}
