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
