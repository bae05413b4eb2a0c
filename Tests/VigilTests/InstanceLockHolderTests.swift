import Glibc
import Testing

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
}
