import VigilPlatform

/// The few file operations Vigil needs, with POSIX calls and no Foundation: one Swift function
/// per job, `EINTR` retried, every call through ``SystemCall`` (so a test can fail it).
package enum FileSystem {
    /// The configuration size cap: 1 MiB.
    package static let configurationLimit = 1 << 20
    /// The state size cap: 16 MiB.
    package static let stateLimit = 16 << 20

    /// The whole regular file at `path`, at most `limit` bytes.
    ///
    /// Never blocks on what is not a regular file: the file is opened with `O_NONBLOCK` (a FIFO
    /// with no writer would otherwise block `open` for ever) and `O_NOCTTY`, then `fstat` refuses
    /// a FIFO, socket, device or directory, naming the kind. A file larger than `limit` is
    /// refused with the limit in the reason.
    ///
    /// - Parameter followSymlinks: `false` adds `O_NOFOLLOW`: a symbolic link at `path` is
    ///   refused (`ELOOP`, "is a symbolic link").
    ///
    /// The corresponding C functions are `open`, `fstat`, `read`, `close`.
    package static func read(
        _ path: String,
        limit: Int = stateLimit,
        followSymlinks: Bool = true
    ) throws(SystemError) -> [UInt8] {
        let opened = SystemCall.open(path, readFlags(followSymlinks: followSymlinks))
        guard opened >= 0 else {
            let code = errno
            if code == ELOOP && !followSymlinks && isSymbolicLink(path) {
                throw SystemError(
                    path: path,
                    operation: "read",
                    errno: code,
                    detail: "it is a symbolic link; this file must be a regular file, not a link"
                )
            }
            throw SystemError(path: path, operation: "read", errno: code)
        }
        return try read(opened: FileDescriptor(opened), path: path, limit: limit)
    }

    /// The flags ``read(_:limit:followSymlinks:)`` opens a file with (`O_NONBLOCK`: a FIFO with
    /// no writer never blocks the open).
    package static func readFlags(followSymlinks: Bool = true) -> Int32 {
        O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followSymlinks ? 0 : O_NOFOLLOW)
    }

    /// The whole regular file open at `opened` (opened with ``readFlags(followSymlinks:)``), at
    /// most `limit` bytes; `path` names it in errors. What ``read(_:limit:followSymlinks:)`` does
    /// once the file is open, for a caller that opened it another way.
    package static func read(
        opened: consuming FileDescriptor,
        path: String,
        limit: Int
    ) throws(SystemError) -> [UInt8] {
        let descriptor = opened.rawValue
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw SystemError(path: path, operation: "read", errno: errno) }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG else {
            throw SystemError(
                path: path,
                operation: "read",
                errno: kind == S_IFDIR ? EISDIR : EINVAL,
                detail: "it is \(describeKind(kind)), not a regular file"
            )
        }
        let tooLarge = SystemError(
            path: path,
            operation: "read",
            errno: EFBIG,
            detail: "it is larger than the limit of \(describeSize(limit)) for this file"
        )
        if Int64(info.st_size) > Int64(limit) { throw tooLarge }
        switch readAll(descriptor, limit: limit, expected: Int64(info.st_size), subject: .path(path)) {
        case .success(let bytes): return bytes
        case .failure(.tooLarge): throw tooLarge
        case .failure(.system(let code)): throw SystemError(path: path, operation: "read", errno: code)
        }
    }

    /// Why ``readAll(_:limit:expected:)`` stopped.
    package enum ReadAllFailure: Error {
        /// More than the limit: the file may grow while it is read, so the cap holds for what
        /// is read, not only for what `fstat` said.
        case tooLarge
        /// `read` failed with this errno.
        case system(Int32)
    }

    /// Everything left to read from an open descriptor, at most `limit` bytes, `EINTR` retried.
    /// `expected` (the size `fstat` gave) only sizes the buffer. The corresponding C function
    /// is `read`; `subject` names the file for ``SystemCall``'s failure seam.
    package static func readAll(
        _ descriptor: Int32,
        limit: Int,
        expected: Int64 = 0,
        subject: @autoclosure () -> SystemCall.Subject = .unspecified
    ) -> Result<[UInt8], ReadAllFailure> {
        // Reads into one buffer of the size `fstat` gave and a byte more (so that the call
        // after the last byte sees the end), doubled when the file grew; no zero-filled
        // staging buffer (a 64 KiB memset was most of a reload's file read). A size of 0 is
        // procfs's and sysfs's "unknown": 4 KiB at once, since a sysctl file answers only the
        // first read (read 1 byte, then the rest, and `/proc/sys/kernel/overflowuid` was "6").
        let ceiling = limit < Int.max ? max(limit, 0) + 1 : Int.max
        var capacity = expected > 0 ? Int(min(expected, Int64(ceiling - 1))) + 1 : min(4096, ceiling)
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer { buffer.deallocate() }
        var count = 0
        while true {
            if count == capacity {
                capacity = capacity > ceiling / 2 ? ceiling : min(max(capacity * 2, 4096), ceiling)
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
                grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                buffer.deallocate()
                buffer = grown
            }
            let received = SystemCall.read(
                descriptor,
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[count..<capacity]),
                subject()
            )
            if received < 0 { return .failure(.system(errno)) }
            if received == 0 { return .success(Array(buffer[..<count])) }
            count += received
            if count > limit { return .failure(.tooLarge) }
        }
    }

    /// Writes all of `bytes` to an open descriptor, `EINTR` retried; returns the errno of a
    /// failed `write` (`EIO` when it wrote nothing), or `nil`. The corresponding C function is
    /// `write`; `subject` names the file for ``SystemCall``'s failure seam.
    package static func writeAll(
        _ bytes: [UInt8],
        to descriptor: Int32,
        subject: @autoclosure () -> SystemCall.Subject = .unspecified
    ) -> Int32? {
        bytes.withUnsafeBytes { SystemCall.writeAll($0, to: descriptor, subject()) }
    }

    /// `a FIFO (named pipe)`, `a directory`, …: the kind of file an `S_IFMT` value names.
    package static func describeKind(_ kind: mode_t) -> String {
        switch kind {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFLNK: "a symbolic link"
        default: "a file of unknown kind"
        }
    }

    /// `1 MiB`, `16 MiB`, `512 bytes`.
    package static func describeSize(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    /// `true` when `path` itself is a symbolic link. The corresponding C function is `lstat`.
    package static func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    /// Whether `path` is absent in the plain sense: nothing at all at `path` (not even a
    /// dangling symbolic link), and its directory exists and can be searched. Anything else — a
    /// dangling link, a link loop, a directory the process may not search — is not absence but
    /// a failure to read. The corresponding C functions are `lstat` and `stat`.
    package static func isAbsent(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) != 0, errno == ENOENT else { return false }
        let directory = parent(of: path)
        return stat(directory, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && access(directory, X_OK) == 0
    }

    /// Replaces `path` with `bytes` so that a crash at any moment leaves either the old file or
    /// the new one, never a mix: write a temporary file beside it, `fsync` it, `rename` it over
    /// the old one, `fsync` the directory.
    ///
    /// - Parameter beforeRename: test hook, called between the `fsync` and the `rename`.
    /// - Parameter durable: `false` skips both `fsync`s (for files on tmpfs, like runtime
    ///   status, where a power loss takes the file anyway); the rename stays atomic.
    package static func writeAtomically(
        _ bytes: [UInt8],
        to path: String,
        durable: Bool = true,
        beforeRename: () -> Void = {}
    ) throws(SystemError) {
        let temporary = temporaryName(for: path)
        // A stale temporary file (from a crash) is removed, and the new one is created with
        // O_EXCL|O_NOFOLLOW: a symbolic link planted at `<path>.tmp` is never written through.
        try remove(temporary)
        let descriptor = SystemCall.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw SystemError(path: temporary, operation: "create", errno: errno) }
        // Mode 0600 whatever the umask (0777 would leave a file its owner cannot read back).
        var failure =
            fchmod(descriptor, 0o600) == 0
            ? nil : SystemError(path: temporary, operation: "set the mode of", errno: errno)
        if failure == nil {
            failure = writeAll(bytes, to: descriptor, subject: .path(temporary)).map {
                SystemError(path: temporary, operation: "write", errno: $0)
            }
        }
        if failure == nil && durable && SystemCall.fsync(descriptor, .path(temporary)) != 0 {
            failure = SystemError(path: temporary, operation: "fsync", errno: errno)
        }
        SystemCall.close(descriptor)
        if let failure {
            unlink(temporary)
            throw failure
        }
        beforeRename()
        guard SystemCall.retrying32(.rename, .path(path), { rename(temporary, path) }) == 0 else {
            let error = SystemError(path: path, operation: "rename \(temporary) to", errno: errno)
            unlink(temporary)
            throw error
        }
        if durable { try syncDirectory(of: path) }
    }

    /// `<path>.tmp`: one writer per file at a time (the state store serialises its writes).
    package static func temporaryName(for path: String) -> String { path + ".tmp" }

    /// `fsync` on the directory holding `path`, so a rename or unlink in it is durable.
    package static func syncDirectory(of path: String) throws(SystemError) {
        let directory = parent(of: path)
        let descriptor = try FileDescriptor(opening: directory, O_RDONLY | O_DIRECTORY, operation: "open directory")
        guard SystemCall.fsync(descriptor.rawValue, .path(directory)) == 0 else {
            throw SystemError(path: directory, operation: "fsync", errno: errno)
        }
    }

    package static func parent(of path: String) -> String {
        // By bytes, as the kernel reads a path: "/" followed by a combining mark is one Swift
        // Character, so a search by Character would not find that slash.
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == path.utf8.startIndex ? "/" : String(decoding: path.utf8[..<slash], as: UTF8.self)
    }

    /// The name of a `readdir` entry, read up to its NUL. A `dirent` is only as long as its name
    /// (`d_reclen`): copying the whole 256-byte `d_name` (`withUnsafeBytes(of: entry.pointee.d_name)`)
    /// reads past the entry, and past the end of `readdir`'s buffer when the entry is its last,
    /// into whatever follows, an unmapped page included (a crash the test suite hit in CI).
    package static func entryName(_ entry: UnsafePointer<dirent>) -> String {
        guard let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name) else { return "" }
        let name = UnsafeRawPointer(entry).advanced(by: offset).assumingMemoryBound(to: CChar.self)
        return String(decoding: UnsafeRawBufferPointer(start: name, count: strlen(name)), as: UTF8.self)
    }

    /// Whether `path` starts with a `/` byte: `hasPrefix("/")` compares Characters, and a "/"
    /// before a combining mark is another Character.
    package static func isAbsolute(_ path: String) -> Bool { path.utf8.first == UInt8(ascii: "/") }

    /// The components of `path` as the kernel splits it: at every `/` byte (a `/` before a
    /// combining mark is one Swift `Character` with it, which `split(separator: "/")` keeps
    /// whole). A `/` byte never occurs inside another character's UTF-8, so each component
    /// decodes as it was written.
    package static func components(of path: String, omittingEmpty: Bool = true) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: omittingEmpty).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    package static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Removes a file; a missing file is fine.
    package static func remove(_ path: String) throws(SystemError) {
        if unlink(path) != 0 && errno != ENOENT {
            throw SystemError(path: path, operation: "remove", errno: errno)
        }
    }

    package static func move(_ from: String, to: String) throws(SystemError) {
        guard SystemCall.retrying32(.rename, .path(from), { rename(from, to) }) == 0 else {
            throw SystemError(path: to, operation: "move \(from) to", errno: errno)
        }
    }

    /// Creates `path` and its missing parents with mode 0700, whatever the umask: each
    /// directory this call creates gets its mode set on its descriptor after `mkdir` (a umask
    /// of 0777 made them mode 000, and such a leftover failed every later start). Existing
    /// directories are left as they are.
    ///
    /// - Parameter verify: called with each directory on the way (`/a`, `/a/b`, … `path`) once
    ///   it exists, made or found, before anything is made in it; what it throws ends the call.
    package static func makeDirectories(
        _ path: String,
        mode: mode_t = 0o700,
        verifying verify: (_ directory: String) throws(SystemError) -> Void = { _ in }
    ) throws(SystemError) {
        var current = isAbsolute(path) ? "" : "."
        for component in components(of: path) {
            current += "/" + component
            guard mkdir(current, mode) == 0 else {
                if errno == EEXIST {
                    try verify(current)
                    continue
                }
                throw SystemError(path: current, operation: "create directory", errno: errno)
            }
            let descriptor = open(current, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard descriptor >= 0 else {
                // Mode 000 cannot be opened by its owner unless root: set it by path, then.
                guard chmod(current, mode) == 0 else {
                    throw SystemError(path: current, operation: "set the mode of", errno: errno)
                }
                try verify(current)
                continue
            }
            guard fchmod(descriptor, mode) == 0 else {
                close(descriptor)
                throw SystemError(path: current, operation: "set the mode of", errno: errno)
            }
            close(descriptor)
            try verify(current)
        }
    }
}
