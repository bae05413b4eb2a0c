#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A failed file-system call: which path, what was being done, and the OS's reason.
public struct FileSystemError: Error, Hashable, CustomStringConvertible, ErrnoRepresentable {
    /// The path involved.
    public let path: String
    /// What was being done: "read", "write", "rename", …
    public let operation: String
    /// The errno value.
    public let errno: Int32

    /// The OS's reason, e.g. "No such file or directory".
    public var reason: String { String(cString: strerror(errno)) }

    public var description: String { "cannot \(operation) \(path): \(reason)" }
}

/// The few file operations Vigil needs, with POSIX calls and no Foundation: one Swift function
/// per job, `EINTR` retried.
package enum FileSystem {
    private static func retrying(_ call: () -> Int) -> Int {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// The whole file. The corresponding C functions are `open`, `read`, `close`.
    package static func read(_ path: String, limit: Int = 16 << 20) throws(FileSystemError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileSystemError(path: path, operation: "read", errno: errno) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                retrying { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
            }
            if count < 0 { throw FileSystemError(path: path, operation: "read", errno: errno) }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
            if bytes.count > limit {
                throw FileSystemError(path: path, operation: "read (larger than \(limit >> 20) MiB)", errno: EFBIG)
            }
        }
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
    ) throws(FileSystemError) {
        let temporary = temporaryName(for: path)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileSystemError(path: temporary, operation: "create", errno: errno) }
        var failure: FileSystemError?
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = retrying { Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset) }
                if written <= 0 {
                    failure = FileSystemError(path: temporary, operation: "write", errno: errno)
                    return
                }
                offset += written
            }
        }
        if failure == nil && durable && fsync(descriptor) != 0 {
            failure = FileSystemError(path: temporary, operation: "fsync", errno: errno)
        }
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw failure
        }
        beforeRename()
        guard rename(temporary, path) == 0 else {
            let error = FileSystemError(path: path, operation: "rename \(temporary) to", errno: errno)
            unlink(temporary)
            throw error
        }
        if durable { try syncDirectory(of: path) }
    }

    /// `<path>.tmp`: one writer per file at a time (the state store serialises its writes).
    package static func temporaryName(for path: String) -> String { path + ".tmp" }

    /// `fsync` on the directory holding `path`, so a rename or unlink in it is durable.
    package static func syncDirectory(of path: String) throws(FileSystemError) {
        let directory = parent(of: path)
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileSystemError(path: directory, operation: "open directory", errno: errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw FileSystemError(path: directory, operation: "fsync", errno: errno) }
    }

    package static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    package static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Removes a file; a missing file is fine.
    package static func remove(_ path: String) throws(FileSystemError) {
        if unlink(path) != 0 && errno != ENOENT {
            throw FileSystemError(path: path, operation: "remove", errno: errno)
        }
    }

    package static func move(_ from: String, to: String) throws(FileSystemError) {
        guard rename(from, to) == 0 else {
            throw FileSystemError(path: from, operation: "move \(to) from", errno: errno)
        }
    }

    /// Creates `path` and its missing parents with mode 0700.
    package static func makeDirectories(_ path: String) throws(FileSystemError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                throw FileSystemError(path: current, operation: "create directory", errno: errno)
            }
        }
    }
}
