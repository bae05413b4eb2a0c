import CVigilEventLoop
import VigilPOSIX
import VigilPlatform

/// Opens a file on the calling thread when nothing on the way can wait on a network or a
/// user-space server, so that a read of it need not hop to ``BlockingWorker``'s helper thread.
///
/// A configuration in `/etc` on the root's ext4 cannot hang the way a file on a hard NFS mount or
/// behind a FUSE server can; handing its read to the helper thread costs a futex wake and a
/// switch to the other CPU on every reload (most of a reload's round trip, measured in the
/// README's performance section). So the read stays in place when `openat2(2)` with
/// `RESOLVE_NO_XDEV` resolves the path without crossing a mount (a crossing fails before the
/// other file system is asked anything) and `fstatfs` names a local file system: ext2/3/4, XFS,
/// Btrfs, F2FS, tmpfs or ramfs. `fstatfs` is asked on every call: a process's root can move
/// (`chroot`, `setns`, `pivot_root` at systemd's switch-root), and an answer kept from before
/// would let a read on a FUSE mount that never answers block the event loop. Anything else (another mount on the way, a symbolic link into one, NFS, FUSE, overlayfs, a
/// kernel before 5.6) returns `nil`, and the caller reads on the helper thread with its deadline,
/// as before.
package enum LocalFile {
    /// `path` opened with `flags` (`O_CLOEXEC` added), or `nil` when it cannot be opened in
    /// place as described above; `nil` says nothing about the file (the slow path reports
    /// errors).
    package static func open(_ path: String, flags: Int32) -> FileDescriptor? {
        let descriptor = cvigil_open_local(path, flags | O_CLOEXEC)
        return descriptor >= 0 ? FileDescriptor(descriptor) : nil
    }
}

extension LocalFile {
    /// The file system a path is on, as a message names it: `statfs`'s type, checked against
    /// the local list ``LocalFile/open(_:flags:)`` trusts, and the type and mount point
    /// `/proc/self/mountinfo` gives the mount (`fuse.sshfs`, `nfs4`, `overlay`).
    package struct FileSystemType: Equatable, Sendable {
        /// `statfs`'s `f_type` (`FUSE_SUPER_MAGIC`, `TMPFS_MAGIC`, …).
        package var magic: UInt32
        /// The mount's type from `/proc/self/mountinfo`, else a name for ``magic``.
        package var name: String
        /// Where the file system is mounted, when `/proc/self/mountinfo` says.
        package var mountPoint: String?

        package init(magic: UInt32, name: String? = nil, mountPoint: String? = nil) {
            self.magic = magic
            self.name = name ?? Self.name(of: magic)
            self.mountPoint = mountPoint
        }

        /// Whether nothing on it can wait on a network or a user-space server: ext2/3/4, XFS,
        /// Btrfs, F2FS, tmpfs or ramfs (the list ``LocalFile/open(_:flags:)`` reads in place on).
        package var isLocal: Bool { cvigil_is_local_file_system(Int(magic)) }

        /// The usual name of a file system's magic number, else the number in hex.
        static func name(of magic: UInt32) -> String {
            switch magic {
            case 0xEF53: "ext4"
            case 0x5846_5342: "xfs"
            case 0x9123_683E: "btrfs"
            case 0xF2F5_2010: "f2fs"
            case 0x0102_1994: "tmpfs"
            case 0x8584_58F6: "ramfs"
            case 0x6573_5546: "fuse"
            case 0x6969: "nfs"
            case 0xFF53_4D42: "cifs"
            case 0xFE53_4D42: "smb3"
            case 0x0102_1997: "9p"
            case 0x00C3_6400: "ceph"
            case 0x794C_7630: "overlay"
            case 0x2FC1_2FC1: "zfs"
            default: "type 0x" + String(magic, radix: 16)
            }
        }
    }

    /// The file system of the directory at `path` (links followed), or the error of `stat` or
    /// `statfs`. It asks that file system (a FUSE server is asked `statfs`): call it where a
    /// file system that does not answer cannot stall the event loop (``BlockingWorker``).
    package static func fileSystem(of path: String) throws(SystemError) -> FileSystemType {
        var magic: UInt32 = 0
        let result = cvigil_path_file_system_type(path, &magic)
        guard result == 0 else { throw SystemError(path: path, operation: "check the file system of", errno: -result) }
        var file = stat()
        guard stat(path, &file) == 0 else { return FileSystemType(magic: magic) }
        let mount = mount(of: UInt64(file.st_dev), path: path)
        return FileSystemType(magic: magic, name: mount?.type, mountPoint: mount?.point)
    }

    /// The type and mount point of the mount of device `device` in `/proc/self/mountinfo` (a
    /// file system the kernel answers for, which cannot hang): of the mounts of that device (a
    /// bind mount shares it), the one whose mount point is the longest prefix of `path` resolved.
    static func mount(of device: UInt64, path: String) -> (type: String, point: String)? {
        guard let bytes = try? FileSystem.read("/proc/self/mountinfo", limit: 16 << 20) else { return nil }
        return mount(of: device, path: path, in: String(decoding: bytes, as: UTF8.self))
    }

    /// ``mount(of:path:)`` on the text of a `mountinfo` file (a test gives its own).
    package static func mount(of device: UInt64, path: String, in mountinfo: String) -> (type: String, point: String)? {
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let wanted = "\(major):\(minor)"
        let resolved = realpath(path, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        }
        var last: (type: String, point: String)?
        var inside: (type: String, point: String)?
        for line in mountinfo.split(separator: "\n") {
            // id parent major:minor root mount-point options [optional…] - type source options
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[2] == wanted, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count
            else { continue }
            let point = unescape(fields[4])
            let candidate = (type: String(fields[dash + 1]), point: point)
            last = candidate
            // A later mount on the same point is the one in force: `>=`.
            if let resolved, point == "/" || resolved == point || resolved.hasPrefix(point + "/"),
                point.count >= (inside?.point.count ?? 0)
            {
                inside = candidate
            }
        }
        return inside ?? last
    }

    /// A mountinfo field with its octal escapes (`\040` for a space) decoded.
    private static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
                let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
