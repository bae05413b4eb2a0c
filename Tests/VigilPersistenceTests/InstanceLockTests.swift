import Glibc
import Testing
import VigilPOSIX
import VigilTesting

@testable import VigilPersistence

/// One daemon per directory (issue 21 item 3), systemd's `DynamicUser=` link for a preserved runtime directory (item 14), and the
/// library's shutdown marker (item 4).
@Suite(.serialized) struct InstanceLockTests {
    static func scratch() -> String {
        var template = Array("/tmp/vigil-lock-XXXXXX".utf8CString)
        return String(cString: mkdtemp(&template)!)
    }

    /// Two opens conflict even in one process (two daemons in one test runner), the second
    /// names the holder's pid, and closing the first frees the directory.
    @Test func aSecondLockOnOneDirectoryIsRefusedNamingTheHolder() throws {
        let path = Self.scratch()
        let directory = try TrustedDirectory.open(path)
        var first: InstanceLock? = try directory.lockInstance()
        #expect(TextFile.read(path + "/instance.lock") == "\(getpid())\n")
        let refused = #expect(throws: SystemError.self) { try directory.lockInstance() }
        #expect(refused?.errno == EWOULDBLOCK)
        #expect(refused?.detail?.hasPrefix("pid \(getpid()) holds it: another daemon runs on \(path).") == true)
        let byPath = #expect(throws: SystemError.self) { try InstanceLock.acquire(inDirectoryAt: path) }
        #expect(byPath?.errno == EWOULDBLOCK)
        // The same directory by another name shares the lock it already holds.
        symlink(path, path + ".link")
        #expect(try InstanceLock.acquire(inDirectoryAt: path + ".link", held: first) === first)
        unlink(path + ".link")
        first = nil
        // Closing the descriptor frees the lock unless a child that another test spawns at this
        // moment still holds a copy of it (a spawned child has the parent's descriptors from
        // clone until exec closes the close-on-exec ones): try again for at most 2 s.
        var again: InstanceLock?
        for _ in 0..<200 where again == nil {
            again = try? directory.lockInstance()
            if again == nil { usleep(10_000) }
        }
        #expect(again != nil, "closing the only holder freed the directory")
        again = nil
        unlink(path + "/instance.lock")
        rmdir(path)
    }

    @Test func aPlantedLockFileThatIsNotARegularFileIsRefused() throws {
        let path = Self.scratch()
        symlink("/etc/passwd", path + "/instance.lock")
        let link = #expect(throws: SystemError.self) { try TrustedDirectory.open(path).lockInstance() }
        #expect(link?.errno == ELOOP)
        #expect(link?.description == "cannot open the lock file \(path)/instance.lock: it is a symbolic link")
        unlink(path + "/instance.lock")
        mkfifo(path + "/instance.lock", 0o600)
        let fifo = #expect(throws: SystemError.self) { try TrustedDirectory.open(path).lockInstance() }
        #expect(fifo?.errno == EINVAL)
        unlink(path + "/instance.lock")
        // A hard link to another file (/etc/shadow, where fs.protected_hardlinks is off): before,
        // the file was truncated, given the pid and, under root, chowned to the directory's owner.
        let victim = path + ".victim"
        writeFile(victim, "secret\n")
        chmod(victim, 0o600)
        #expect(Glibc.link(victim, path + "/instance.lock") == 0)
        let linked = #expect(throws: SystemError.self) { try TrustedDirectory.open(path).lockInstance() }
        #expect(linked?.errno == EMLINK)
        #expect(linked?.detail?.hasPrefix("it has 2 hard links") == true, "\(String(describing: linked))")
        #expect(TextFile.read(victim) == "secret\n")
        var info = stat()
        #expect(stat(victim, &info) == 0 && info.st_uid == getuid() && info.st_mode & 0o777 == 0o600)
        unlink(path + "/instance.lock")
        unlink(victim)
        rmdir(path)
    }

    /// `DynamicUser=yes` + `RuntimeDirectoryPreserve=yes`: systemd makes `/run/<name>` a link
    /// to `private/<name>`. Before, the runtime directory's check refused it ("it is a symbolic
    /// link"); now the link is followed when only root can have made it.
    @Test(.enabled(if: getuid() == 0, "planting other uids' directories needs root"))
    func systemdsLinkToAPrivateDirectoryIsFollowedOnlyWhenRootMadeIt() throws {
        var template = Array("/run/vigil-private-XXXXXX".utf8CString)
        let base = String(cString: mkdtemp(&template)!)
        chmod(base, 0o755)
        mkdir(base + "/private", 0o700)
        mkdir(base + "/private/jobd", 0o755)
        chown(base + "/private/jobd", 65_534, 65_534)
        symlink("private/jobd", base + "/jobd")
        defer {
            for name in ["jobd/instance.lock", "jobd", "private/jobd", "private", "other"] {
                unlink(base + "/" + name)
                rmdir(base + "/" + name)
            }
            rmdir(base)
        }
        let directory = try TrustedDirectory.create(base + "/jobd")
        #expect(directory.owner == 65_534)
        #expect(directory.path == base + "/jobd")
        _ = try directory.lockInstance()
        // The lock file is the directory owner's, as systemd would have it.
        var info = stat()
        #expect(stat(base + "/private/jobd/instance.lock", &info) == 0 && info.st_uid == 65_534)

        // A link another user made, or one to somewhere else, is still refused.
        lchown(base + "/jobd", 1234, 1234)
        #expect(throws: SystemError.self) { try TrustedDirectory.open(base + "/jobd") }
        lchown(base + "/jobd", 0, 0)
        symlink("/etc", base + "/other")
        #expect(throws: SystemError.self) { try TrustedDirectory.open(base + "/other") }
        // …and so is the right link when others may write where it lies.
        chmod(base, 0o777)
        #expect(throws: SystemError.self) { try TrustedDirectory.open(base + "/jobd") }
        chmod(base, 0o755)
        chmod(base + "/private", 0o777)
        #expect(throws: SystemError.self) { try TrustedDirectory.open(base + "/jobd") }
    }

    @Test func theShutdownMarkerTellsCleanFromUnclean() throws {
        let path = Self.scratch()
        let marker = ShutdownMarker(path: path + "/db.running")
        #expect(marker.previousShutdownClean == nil, "unknown before begin()")
        #expect(try marker.beginReading() == .init(clean: true, pid: nil))
        #expect(marker.previousShutdownClean == true)
        // The run ends without end(): a crash.
        let next = ShutdownMarker(path: path + "/db.running")
        #expect(try next.beginReading() == .init(clean: false, pid: "\(getpid())"))
        #expect(next.previousShutdownClean == false)
        try next.end()
        #expect(FileSystem.isAbsent(path + "/db.running"))
        #expect(try ShutdownMarker(path: path + "/db.running").begin() == true)
        unlink(path + "/db.running")
        // No marker and no data from before: a first run, of whose previous stop nothing is known.
        let first = ShutdownMarker(path: path + "/db.running")
        #expect(try first.beginReading(dataExisted: false) == .init(clean: true, pid: nil, firstRun: true))
        #expect(first.previousShutdownClean == nil, "a first start is not a clean previous stop")
        // A marker left there says unclean whatever the data.
        let after = ShutdownMarker(path: path + "/db.running")
        #expect(try after.beginReading(dataExisted: false) == .init(clean: false, pid: "\(getpid())"))
        #expect(after.previousShutdownClean == false)
        unlink(path + "/db.running")
        // What a daemon author's begin returns: what previousShutdownClean says from then on.
        #expect(try ShutdownMarker(path: path + "/db.running").begin(dataExisted: false) == nil)
        #expect(try ShutdownMarker(path: path + "/db.running").begin(dataExisted: false) == false)
        unlink(path + "/db.running")
        rmdir(path)
    }
}
