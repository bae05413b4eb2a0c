import Glibc
import Testing
import VigilPersistence
import VigilTesting

@testable import Vigil

/// The proof `reload` and `status` accept when a status file's directory is not owned by the
/// daemon's user (systemd 257's mapped `DynamicUser=` directories): the pid holds the
/// directory's `instance.lock`, as `/proc/locks` shows.
@Suite struct InstanceLockHolderTests {
    @Test func aPidHoldsTheLockOnlyWhileItsFlockIsTaken() throws {
        var template = Array("/tmp/vigil-lock-holder.XXXXXX".utf8CString)
        let directory = String(cString: try #require(mkdtemp(&template)))
        defer {
            for name in ["instance.lock", "other", "second"] { unlink(directory + "/" + name) }
            rmdir(directory)
        }
        let path = directory + "/instance.lock"
        let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        #expect(!InstanceLockHolder.holds(getpid(), lock: path, owner: getuid()), "no lock taken yet")
        #expect(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
        #expect(InstanceLockHolder.holds(getpid(), lock: path, owner: getuid()))
        #expect(!InstanceLockHolder.holds(getpid() + 1, lock: path, owner: getuid()), "another pid")
        #expect(!InstanceLockHolder.holds(getpid(), lock: path, owner: getuid() + 1), "another owner")
        // Another file of the same directory: not the lock.
        let other = directory + "/other"
        close(open(other, O_CREAT | O_RDWR | O_CLOEXEC, 0o600))
        #expect(!InstanceLockHolder.holds(getpid(), lock: other, owner: getuid()))
        // A second link to the lock file is refused (a planted hard link).
        #expect(link(path, directory + "/second") == 0)
        #expect(!InstanceLockHolder.holds(getpid(), lock: path, owner: getuid()))
        unlink(directory + "/second")
        #expect(flock(descriptor, LOCK_UN) == 0)
        #expect(!InstanceLockHolder.holds(getpid(), lock: path, owner: getuid()), "released")
    }

    /// `/proc/locks` names the process that took the lock, also once only a child that inherited
    /// the descriptor holds it: that pid may since name another process (a helper made `sudo
    /// vigild reload` signal a root process after pid reuse). Here this process took the lock,
    /// handed the descriptor to a child and closed its own: `/proc/locks` still names this
    /// process, which holds no descriptor on the file, so it is not the holder; nor is the child,
    /// whose descriptor crossed an execve (a setuid program exec'd with the lock held passes
    /// the pid and start-time checks: a reviewer's attack).
    @Test func thePidThatTookTheLockIsNotItsHolderOnceItHoldsNoDescriptor() throws {
        let directory = temporaryDirectory("vigil-lock-holder")
        let path = directory + "/instance.lock"
        let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0)
        try #require(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
        #expect(InstanceLockHolder.holds(getpid(), lock: path, owner: getuid()))
        // A child with the locked description as its standard input.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, descriptor, 0)
        var child: pid_t = 0
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { arguments.forEach { free($0) } }
        try #require(posix_spawn(&child, "/bin/sleep", &actions, nil, arguments, environ) == 0)
        defer {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        close(descriptor)
        var file = stat()
        try #require(stat(path, &file) == 0)
        let listed = InstanceLockHolder.holders(
            in: try #require(readFile("/proc/locks")),
            device: UInt64(file.st_dev),
            inode: UInt64(file.st_ino)
        )
        #expect(listed == [getpid()], "the taker is still what /proc/locks names")
        #expect(!InstanceLockHolder.holds(getpid(), lock: path, owner: getuid()))
        #expect(InstanceLockHolder.holder(lock: path, owner: getuid()) == nil)
        // The child holds the lock through a descriptor that survived its execve (no O_CLOEXEC):
        // another program under that pid, not a daemon's own lock, so not a holder either.
        #expect(
            InstanceLockHolder.holdsDescriptor(child, device: UInt64(file.st_dev), inode: UInt64(file.st_ino)) == false
        )
        #expect(!InstanceLockHolder.holds(child, lock: path, owner: getuid()))
    }
}
