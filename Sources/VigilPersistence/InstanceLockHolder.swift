import VigilPOSIX
import VigilPlatform

/// Who holds a directory's `instance.lock`, as `/proc/locks` shows it: the proof `reload` and
/// `status` take that a status file's pid is the daemon of that directory when the directory's
/// owner is not the process's user (systemd 257 maps a `DynamicUser=` unit's preserved runtime
/// directory, which is then owned by `nobody` outside the unit), and the daemon's pid as this
/// process sees it when the daemon runs in a PID namespace of its own (`PrivatePIDs=`,
/// `unshare --pid`): there it records its own pid, 1 say, which names another process here.
/// `/proc/locks` gives each holder's pid in the PID namespace of the `/proc` it is read from.
///
/// Only `flock`'s own entry for the lock file's device and inode counts, for a regular file
/// with one link owned by the directory's owner: a process can hold a lock only on a file it
/// opened, and the directory's writer cannot make another user's process open its file. And the
/// pid must hold a descriptor on the locked file now, opened with `O_CLOEXEC` as a daemon opens
/// its lock (`/proc/PID/fdinfo` shows both): the pid in `/proc/locks` is the one that took the
/// lock, which may have ended while a child that inherited the descriptor keeps the lock, and its
/// pid may since name another process (a helper's attack made `sudo vigild reload` signal a root
/// process so); and a descriptor without `O_CLOEXEC` may have survived an `execve` into another
/// program (a setuid one, say) under the same pid. Where this process may not read another's
/// fdinfo (another user's daemon, for a user that is not root), `strict: false` (`status`, which
/// signals nothing) takes `/proc/locks`'s word; `reload`, which signals, never does.
package enum InstanceLockHolder {
    /// Whether `pid` holds the lock at `path`.
    package static func holds(_ pid: Int32, lock path: String, owner: uid_t, strict: Bool = true) -> Bool {
        holders(lock: path, owner: owner, strict: strict).contains(pid)
    }

    /// The one process that holds the lock at `path`, by its pid here; `nil` when none does,
    /// when the holder is not visible from this PID namespace (`/proc/locks` shows it as 0), or
    /// when the file is not a lock file a daemon of that directory would hold.
    package static func holder(lock path: String, owner: uid_t, strict: Bool = true) -> Int32? {
        let pids = holders(lock: path, owner: owner, strict: strict)
        guard pids.count == 1, let pid = pids.first, pid > 0 else { return nil }
        return pid
    }

    /// The pids of the `flock` entries (not the blocked waiters) on the file at `path`.
    package static func holders(lock path: String, owner: uid_t, strict: Bool = true) -> [Int32] {
        var file = stat()
        guard lstat(path, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_nlink == 1, file.st_uid == owner
        else { return [] }
        // /proc/locks is small and procfs does not hang; bounded all the same.
        guard let bytes = try? FileSystem.read("/proc/locks", limit: 1 << 20) else { return [] }
        let (device, inode) = (UInt64(file.st_dev), UInt64(file.st_ino))
        return holders(in: String(decoding: bytes, as: UTF8.self), device: device, inode: inode).filter { pid in
            guard pid > 0 else { return true }
            return holdsDescriptor(pid, device: device, inode: inode) ?? !strict
        }
    }

    /// Whether a descriptor of `pid` is on the file description that holds the `flock` on
    /// `device`, `inode` and was opened with `O_CLOEXEC`: its `/proc/PID/fdinfo/N` shows the lock
    /// (`lock:\t1: FLOCK …`) and the flag (`flags:\t02…`, octal). At most 65 536 descriptors are
    /// read; `nil` when this process may not read the fdinfo of `pid` (`EACCES`).
    package static func holdsDescriptor(_ pid: Int32, device: UInt64, inode: UInt64) -> Bool? {
        let directory = "/proc/\(pid)/fdinfo"
        guard let entries = opendir(directory) else { return errno == EACCES ? nil : false }
        defer { closedir(entries) }
        var read = 0
        while read < 65_536, let entry = readdir(entries) {
            let name = FileSystem.entryName(entry)
            guard name.first?.isNumber == true else { continue }
            read += 1
            guard let bytes = try? FileSystem.read(directory + "/" + name, limit: 1 << 16) else { continue }
            let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
            let locks = lines.compactMap { line in
                line.hasPrefix("lock:") ? line.dropFirst("lock:".count).drop { $0 == "\t" || $0 == " " } : nil
            }
            guard !locks.isEmpty, !holders(in: locks.joined(separator: "\n"), device: device, inode: inode).isEmpty
            else { continue }
            // O_CLOEXEC is 02000000 in the octal `flags:` line.
            let flags = lines.first { $0.hasPrefix("flags:") }.flatMap {
                Int($0.dropFirst("flags:".count).trimmingPrefix { $0 == "\t" || $0 == " " }, radix: 8)
            }
            if let flags, flags & 0o2_000_000 != 0 { return true }
        }
        return false
    }

    /// The pids in `/proc/locks` text `text` of the `flock` entries on `device`, `inode`.
    package static func holders(in text: String, device: UInt64, inode: UInt64) -> [Int32] {
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        var pids: [Int32] = []
        for line in text.split(separator: "\n") {
            // "1: FLOCK  ADVISORY  WRITE 1234 00:19:5678 0 EOF"; "->" marks a blocked waiter.
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[2] != "->", let pid = Int32(fields[4]) else {
                continue
            }
            let id = fields[5].split(separator: ":")
            guard id.count == 3, UInt64(id[0], radix: 16) == major, UInt64(id[1], radix: 16) == minor,
                UInt64(id[2]) == inode
            else { continue }
            pids.append(pid)
        }
        return pids
    }
}
