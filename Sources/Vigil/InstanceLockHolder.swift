import VigilPOSIX
import VigilPersistence
import VigilPlatform

/// Whether a process holds a directory's `instance.lock`, as `/proc/locks` shows it: the proof
/// `reload` and `status` take that a status file's pid is the daemon of that directory when the
/// directory's owner is not the process's user (systemd 257 maps a `DynamicUser=` unit's
/// preserved runtime directory, which is then owned by `nobody` outside the unit).
///
/// Only `flock`'s own entry for the lock file's device and inode counts, for a regular file
/// with one link owned by the directory's owner: a process can hold a lock only on a file it
/// opened, and the directory's writer cannot make another user's process open its file.
package enum InstanceLockHolder {
    package static func holds(_ pid: Int32, lock path: String, owner: uid_t) -> Bool {
        var file = stat()
        guard lstat(path, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_nlink == 1, file.st_uid == owner
        else { return false }
        // /proc/locks is small and procfs does not hang; bounded all the same.
        guard let bytes = try? FileSystem.read("/proc/locks", limit: 1 << 20) else { return false }
        let device = UInt64(file.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let wanted = String(major, radix: 16) + ":" + String(minor, radix: 16) + ":\(file.st_ino)"
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            // "1: FLOCK  ADVISORY  WRITE 1234 00:19:5678 0 EOF"; "->" marks a blocked waiter.
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[2] != "->", Int32(fields[4]) == pid else { continue }
            let id = fields[5].split(separator: ":")
            guard id.count == 3, let lockMajor = UInt64(id[0], radix: 16), let lockMinor = UInt64(id[1], radix: 16)
            else { continue }
            if String(lockMajor, radix: 16) + ":" + String(lockMinor, radix: 16) + ":" + id[2] == wanted { return true }
        }
        return false
    }
}
