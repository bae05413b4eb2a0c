import Synchronization
import VigilPOSIX
import VigilPlatform

/// A listener's persisted value in the state-store and listener tests: `{"count": N}`.
package struct Counter: Codable, Equatable, Sendable {
    package var count: Int
    package init(count: Int) { self.count = count }
}

/// A new, empty directory for one test, named `prefix-XXXXXX`, in this test process's own
/// directory under `base` (`/tmp/vigil-tests-PID`, or under `/dev/shm` for a test that wants
/// tmpfs): every one goes when the process exits (`TestDirectories`), so runs of the suite do not
/// pile up directories in `/tmp`. `VIGIL_KEEP_TEST_FILES=1 swift test …` keeps them (later runs
/// too leave them), for reading the logs a failed test names.
package func temporaryDirectory(_ prefix: String = "vigil-state", under base: String = "/tmp") -> String {
    TestDirectories.make(prefix, under: base)
}

/// The directories `temporaryDirectory` makes, and their removal.
///
/// Each test process keeps its directories in one directory of its own per base,
/// `BASE/vigil-tests-PID`, removed at exit; the first call also removes what earlier processes
/// left (killed, or crashed) under a pid that is no longer running. Removal never leaves the
/// file system it starts on and never asks another one anything: a directory that is a mount
/// point in `/proc/self/mountinfo` (a FUSE mount a failed test left) is kept with what holds
/// it, and entries are told apart by `readdir`'s type alone, so no `stat` can reach a mount
/// whose server hangs.
package enum TestDirectories {
    private static let parents = Mutex<[String: String]>([:])

    /// A new directory `prefix-XXXXXX` in this process's directory under `base`.
    package static func make(_ prefix: String, under base: String) -> String {
        let parent = parents.withLock { parents in
            if let parent = parents[base] { return parent }
            let keep = getenv("VIGIL_KEEP_TEST_FILES") != nil
            if parents.isEmpty, !keep { atexit { TestDirectories.removeOwn() } }
            removeLeftovers(under: base)
            let parent = base + "/vigil-tests-\(getpid())"
            guard mkdir(parent, 0o755) == 0 || errno == EEXIST else {
                preconditionFailure("cannot create \(parent): \(String(cString: strerror(errno)))")
            }
            // A test may run a child under another uid that must reach its own directory.
            chmod(parent, 0o755)
            // Kept for the developer who asked, also from later runs' clean-up.
            if keep { TextFile.write(parent + "/KEPT", "VIGIL_KEEP_TEST_FILES was set\n") }
            parents[base] = parent
            return parent
        }
        var template = Array("\(parent)/\(prefix)-XXXXXX".utf8CString)
        guard let path = mkdtemp(&template) else {
            preconditionFailure("cannot create a directory in \(parent): \(String(cString: strerror(errno)))")
        }
        return String(cString: path)
    }

    /// Removes this process's directories (at exit).
    private static func removeOwn() {
        let own = parents.withLock { Array($0.values) }
        let mounts = mountPoints()
        for path in own {
            let base = open(FileSystem.parent(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard base >= 0 else { continue }
            removeTree(String(path.split(separator: "/").last ?? ""), in: base, path: path, keeping: mounts)
            close(base)
        }
    }

    /// Removes the directories of earlier test processes under `base` whose pid is gone.
    private static func removeLeftovers(under base: String) {
        guard let directory = opendir(base) else { return }
        let baseDescriptor = dirfd(directory)
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = FileSystem.entryName(entry)
            guard name.hasPrefix("vigil-tests-"), let pid = Int32(name.dropFirst("vigil-tests-".count)) else {
                continue
            }
            // Only a real directory of this user's (a link or another user's is not ours to
            // remove), of a pid that is gone, not kept.
            var info = stat()
            guard fstatat(baseDescriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFDIR,
                info.st_uid == geteuid()
            else { continue }
            var kept = stat()
            if pid != getpid(), kill(pid, 0) != 0, errno == ESRCH,
                fstatat(baseDescriptor, name + "/KEPT", &kept, AT_SYMLINK_NOFOLLOW) != 0
            {
                names.append(name)
            }
        }
        closedir(directory)
        guard !names.isEmpty else { return }
        let mounts = mountPoints()
        for name in names where !mounts.contains(base + "/" + name) {
            let parent = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard parent >= 0 else { return }
            removeTree(name, in: parent, path: base + "/" + name, keeping: mounts)
            close(parent)
        }
    }

    /// The mount points of this process's mount namespace (`/proc/self/mountinfo`'s fifth field,
    /// with its octal escapes undone).
    private static func mountPoints() -> Set<String> {
        var points = Set<String>()
        for line in (TextFile.read("/proc/self/mountinfo") ?? "").split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4 else { continue }
            var point = ""
            var scalars = Array(fields[4].unicodeScalars)[...]
            while let scalar = scalars.popFirst() {
                if scalar == "\\", scalars.count >= 3,
                    let code = UInt8(String(String.UnicodeScalarView(scalars.prefix(3))), radix: 8)
                {
                    point.unicodeScalars.append(Unicode.Scalar(code))
                    scalars = scalars.dropFirst(3)
                } else {
                    point.unicodeScalars.append(scalar)
                }
            }
            points.insert(point)
        }
        return points
    }

    /// Removes `name` in the directory open at `parent` (`path` names it, for the mount check)
    /// and what it holds, except a directory in `mounts` and those above it: each level is
    /// opened from the one above with `O_NOFOLLOW`, so a link swapped in anywhere in the tree is
    /// removed, never followed. Returns whether it is gone.
    @discardableResult
    private static func removeTree(_ name: String, in parent: Int32, path: String, keeping mounts: Set<String>) -> Bool
    {
        if mounts.contains(path) { return false }
        let descriptor = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return unlinkat(parent, name, 0) == 0 || errno == ENOENT }
        guard let directory = fdopendir(descriptor) else {
            close(descriptor)
            return false
        }
        var emptied = true
        while let entry = readdir(directory) {
            let child = FileSystem.entryName(entry)
            if child == "." || child == ".." { continue }
            // A directory by its type, or one whose type the file system does not say.
            var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
            if !isDirectory, unlinkat(descriptor, child, 0) != 0 {
                if errno == EISDIR { isDirectory = true } else if errno != ENOENT { emptied = false }
            }
            if isDirectory, !removeTree(child, in: descriptor, path: path + "/" + child, keeping: mounts) {
                emptied = false
            }
        }
        closedir(directory)
        return emptied && (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    }
}

/// Replaces the file at `path` with `text`.
package func writeFile(_ path: String, _ text: String) { TextFile.write(path, text) }

/// The file at `path`, or `nil` when it cannot be read.
package func readFile(_ path: String) -> String? { TextFile.read(path) }
