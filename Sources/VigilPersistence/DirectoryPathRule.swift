import VigilPOSIX
import VigilPlatform

/// The rule for the path of a daemon's state and runtime directories, checked before either is
/// made and again as each missing directory on it is made, so that nothing is ever created
/// where another user chose:
///
/// 1. No symbolic link on the path (the directory itself or one above it) made by another user
///    than the caller or root: that user chooses where it leads (root made
///    `/tmp/victim/r` through `att/link/r`, a link `nobody` put in a directory of theirs).
///    Links made by root or the caller are followed (`DynamicUser=` makes `/var/lib/<name>`
///    and, with `RuntimeDirectoryPreserve=`, `/run/<name>` links to `private/<name>`).
/// 2. No directory above it, as written and as resolved, owned by another user, or writable by
///    group or others without the sticky bit (OpenSSH's `StrictModes` rule): that user could
///    rename a directory on the way and put their own, or a link, in its place between the check
///    and its use. A sticky directory such as `/tmp` is fine: others cannot rename what is not
///    theirs there. Root's directories seen from a user namespace that does not map root (the
///    overflow uid) count as root's.
///
/// The directory's own owner and mode are each kind's own rule: ``StateStore/checkOwnership(of:checkingOwner:)``
/// for the state directory, ``TrustedDirectory`` for the runtime directory.
package enum DirectoryPathRule {
    /// Which directory a message speaks of.
    package enum Role: Sendable {
        case state, runtime

        var noun: String {
            switch self {
            case .state: "the state directory"
            case .runtime: "the runtime directory"
            }
        }
    }

    /// Refuses `directory` when its path breaks the rule above. Only what exists is checked (a
    /// missing directory's parents that exist, and the path those resolve to): nothing is made,
    /// so a run refused here leaves no directory behind.
    package static func check(_ directory: String, role: Role) throws(SystemError) {
        let caller = geteuid()
        // Every component as written, the last one and those above it (`/tmp/theirs/state`,
        // where `theirs` is another user's link, leads where that user chooses just the same).
        // By bytes, as the kernel reads the path (FileSystem.components(of:)): a "/" before a
        // combining mark is one Swift Character, and a split by Character kept it whole.
        var prefix = FileSystem.isAbsolute(directory) ? "" : "."
        for component in FileSystem.components(of: directory) {
            prefix += "/" + component
            try checkLink(prefix, of: directory, role: role, caller: caller)
        }
        try checkParents(of: directory, role: role, caller: caller)
    }

    /// Makes `directory` and its missing parents (mode 0700 whatever the umask, as
    /// ``FileSystem/makeDirectories(_:mode:verifying:)`` does) after ``check(_:role:)``, and
    /// checks each directory on the way once it exists and before anything is made in it: a link
    /// or directory another user put there in the meantime (in a sticky `/tmp`, say) is refused
    /// before it is followed.
    package static func create(_ directory: String, role: Role) throws(SystemError) {
        try check(directory, role: role)
        let caller = geteuid()
        let components = FileSystem.components(of: directory).count
        var reached = 0
        try FileSystem.makeDirectories(directory) { (prefix: String) throws(SystemError) in
            reached += 1
            try checkLink(prefix, of: directory, role: role, caller: caller)
            if reached < components { try checkParent(prefix, of: directory, role: role, caller: caller) }
        }
    }

    /// Refuses `prefix` (a component of `directory`'s path as written) when it is a symbolic
    /// link another user made.
    static func checkLink(_ prefix: String, of directory: String, role: Role, caller: uid_t) throws(SystemError) {
        var link = stat()
        guard lstat(prefix, &link) == 0, link.st_mode & S_IFMT == S_IFLNK, link.st_uid != caller, link.st_uid != 0
        else { return }
        let which = prefix == directory || prefix == "./" + directory ? "it" : "\(prefix), on its path,"
        throw SystemError(
            path: directory,
            operation: "use as \(role.noun)",
            errno: ELOOP,
            detail: "\(which) is a symbolic link made by uid \(link.st_uid), not by this process (uid \(caller)) or "
                + "root, so that user chooses where it leads; give the directory itself"
        )
    }

    /// The uid files of the host's root show in this user namespace when that namespace does not
    /// map it (`unshare -r`, a rootless container, `PrivateUsers=self`): the kernel's overflow
    /// uid (65534). `nil` when root is mapped (as on the host). Such a parent is taken for
    /// root's: from inside, it cannot be told from another unmapped user's.
    private static let unmappedRoot: uid_t? = {
        guard let map = try? FileSystem.read("/proc/self/uid_map", limit: 1 << 16) else { return nil }
        for line in String(decoding: map, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ").compactMap { UInt64($0) }
            // inside, outside, count: host root (outside 0) mapped in this namespace.
            if fields.count == 3, fields[1] == 0, fields[2] > 0 { return nil }
        }
        let overflow = (try? FileSystem.read("/proc/sys/kernel/overflowuid", limit: 64)).flatMap {
            uid_t(String(decoding: $0, as: UTF8.self).split(separator: "\n").first ?? "")
        }
        return overflow ?? 65_534
    }()

    /// Refuses a directory above `directory` (as written, and as resolved) that a user other
    /// than `caller` or root owns, or that group or others may write in without the sticky bit.
    /// A directory that does not exist yet is resolved through its deepest existing parent.
    private static func checkParents(of directory: String, role: Role, caller: uid_t) throws(SystemError) {
        var paths = [directory]
        if let resolved = resolve(directory), resolved != directory {
            // Without a link on the way it is the same path: its parents are checked once.
            paths.append(resolved)
        }
        for path in paths where FileSystem.isAbsolute(path) {
            let components = FileSystem.components(of: path)
            var parent = ""
            for component in components.dropLast() {
                parent += "/" + component
                try checkParent(parent, of: directory, role: role, caller: caller)
            }
            if !components.isEmpty { try checkParent("/", of: directory, role: role, caller: caller) }
        }
    }

    /// `path` with its deepest existing part resolved (`realpath`) and the rest appended as
    /// written; `nil` when no part of it resolves.
    private static func resolve(_ path: String) -> String? {
        var existing = FileSystem.isAbsolute(path) ? path : "./" + path
        var rest: [String] = []
        while true {
            if let resolved = realpath(existing, nil) {
                let base = String(cString: resolved)
                free(resolved)
                guard !rest.isEmpty else { return base }
                return (base == "/" ? "" : base) + "/" + rest.reversed().joined(separator: "/")
            }
            guard existing != "/", let slash = existing.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
            let last = String(decoding: existing.utf8[existing.utf8.index(after: slash)...], as: UTF8.self)
            if !last.isEmpty { rest.append(last) }
            existing = FileSystem.parent(of: existing)
        }
    }

    /// Refuses `parent`, a directory above `directory`, when another user owns it or group or
    /// others may write in it without the sticky bit. A parent that does not exist passes: it
    /// is checked once it is made.
    static func checkParent(_ parent: String, of directory: String, role: Role, caller: uid_t) throws(SystemError) {
        var info = stat()
        guard stat(parent, &info) == 0 else { return }  // the directory's own check names it
        let problem: String
        if info.st_uid != caller && info.st_uid != 0 && info.st_uid != unmappedRoot {
            problem = "is owned by uid \(info.st_uid), not by this process (uid \(caller)) or root"
        } else if info.st_mode & (S_IWOTH | S_IWGRP) != 0 && info.st_mode & S_ISVTX == 0 {
            let who = info.st_mode & S_IWOTH != 0 ? "anyone" : "its group (gid \(info.st_gid))"
            problem = "may be written by \(who) (mode \(String(info.st_mode & 0o7777, radix: 8)), no sticky bit)"
        } else {
            return
        }
        throw SystemError(
            path: directory,
            operation: "use as \(role.noun)",
            errno: EPERM,
            detail: "\(parent), above it, \(problem): that user could rename \(role.noun) away and put "
                + "their own in its place; use a directory whose parents only root or this user may change"
        )
    }
}
