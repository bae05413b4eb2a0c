import Glibc
import Synchronization
import Testing
import VigilTesting

@testable import Vigil

/// What `run` checks before it makes its directories (``HeldLocks/takeDirectories(runtime:state:)``):
/// the runtime directory's file system (a security review: a runtime directory on a FUSE mount
/// whose server stopped answering held the event loop in `openat` writing status.json, with no
/// heartbeat, watchdog ping or answer to SIGTERM for ten minutes), and both directories' path
/// rule, for both before either is made.
@Suite(.serialized) struct RunDirectoriesTests {
    /// The paths a test's file-system seam was asked about.
    private final class Asked: Sendable {
        let paths = Mutex<[String]>([])
    }

    /// A HeldLocks whose file systems are all `type`; records the paths it was asked about.
    private static func locks(onto type: LocalFile.FileSystemType, asked: Asked? = nil) -> HeldLocks {
        HeldLocks { (path: String) throws(SystemError) in
            asked?.paths.withLock { $0.append(path) }
            return type
        }
    }

    /// The path is climbed by bytes, as the kernel reads it, and only past what is missing. By
    /// Character, "/" before a combining mark was no slash: `/mnt/sshfs/\u{301}run` was judged
    /// by `/mnt`'s file system, and a FUSE runtime directory passed (a review found it).
    @Test func theDeepestExistingPartIsFoundByBytes() {
        let base = temporaryDirectory("vigil-deepest")
        #expect(HeldLocks.deepestExisting(base + "/\u{301}run/x") == base)
        #expect(HeldLocks.deepestExisting(base + "/a/b") == base)
        #expect(HeldLocks.deepestExisting(base) == base)
        #expect(HeldLocks.deepestExisting("vigil-no-such-directory/x") == ".")
        #expect(FileSystem.parent(of: base + "/\u{301}run") == base)
        #expect(FileSystem.components(of: "/a/\u{301}b//c") == ["a", "\u{301}b", "c"])
        #expect(FileSystem.components(of: "/a//b/", omittingEmpty: false) == ["", "a", "", "b", ""])
    }

    @Test func aRuntimeDirectoryOnAFileSystemThatCanHangIsRefusedBeforeAnythingIsMade() throws {
        let base = temporaryDirectory("vigil-run")
        let asked = Asked()
        let fuse = LocalFile.FileSystemType(magic: 0x6573_5546, name: "fuse.sshfs", mountPoint: base)
        let error = #expect(throws: SystemError.self) {
            _ = try Self.locks(onto: fuse, asked: asked)
                .takeDirectories(runtime: .init(path: base + "/run/vigild"), state: base + "/state")
        }
        #expect(
            error?.description
                == "cannot use as the runtime directory \(base)/run/vigild: its file system is fuse.sshfs (mounted at \(base)), which can stop answering, and the daemon writes status.json there from its event loop: a write that hangs would stop its heartbeats and watchdog pings and leave SIGTERM unanswered. Use a directory on tmpfs: one under /run (systemd's RuntimeDirectory= makes one there) or, where /run is not a tmpfs (a container), under /dev/shm (--runtime-directory); the runtime directory may be on tmpfs, ramfs, ext2/3/4, XFS, Btrfs or F2FS",
            "\(String(describing: error))"
        )
        #expect(error?.errno == EREMOTE)
        // Asked of the deepest part that exists (where the directory would be made), and nothing made.
        #expect(asked.paths.withLock { $0 } == [base])
        #expect(!FileSystem.exists(base + "/run"))
        #expect(!FileSystem.exists(base + "/state"))

        // NFS, CIFS, overlayfs, an unknown one: the same. The local ones: taken.
        for magic: UInt32 in [0x6969, 0xFF53_4D42, 0x794C_7630, 0x1234_5678] {
            let type = LocalFile.FileSystemType(magic: magic)
            #expect(throws: SystemError.self, "\(type.name)") {
                _ = try Self.locks(onto: type).takeDirectories(runtime: .init(path: base + "/run"), state: nil)
            }
        }
        #expect(LocalFile.FileSystemType(magic: 0x1234_5678).name == "type 0x12345678")
        for magic: UInt32 in [0x0102_1994, 0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010, 0x8584_58F6] {
            let type = LocalFile.FileSystemType(magic: magic)
            let locks = Self.locks(onto: type)
            #expect(throws: Never.self, "\(type.name)") {
                _ = try locks.takeDirectories(runtime: .init(path: base + "/run-\(type.name)"), state: nil)
            }
        }
    }

    /// The same, for real: an overlay mount (not on the local list: its lower layers may be on
    /// any file system), whose file system `statfs` and /proc/self/mountinfo name.
    @Test(.enabled(if: geteuid() == 0, "mounting needs root"))
    func aRuntimeDirectoryOnAnOverlayMountIsRefused() throws {
        let base = temporaryDirectory("vigil-run")
        for name in ["lower", "upper", "work", "merged"] { mkdir(base + "/" + name, 0o755) }
        let options = "lowerdir=\(base)/lower,upperdir=\(base)/upper,workdir=\(base)/work"
        try #require(mount("overlay", base + "/merged", "overlay", 0, options) == 0, "mount overlay: errno \(errno)")
        defer { umount2(base + "/merged", Int32(MNT_DETACH)) }
        let error = #expect(throws: SystemError.self) {
            _ = try HeldLocks().takeDirectories(runtime: .init(path: base + "/merged/run"), state: nil)
        }
        #expect(
            error?.description.hasPrefix(
                "cannot use as the runtime directory \(base)/merged/run: its file system is overlay (mounted at \(base)/merged), which can stop answering"
            ) == true,
            "\(String(describing: error))"
        )
        #expect(!FileSystem.exists(base + "/upper/run"), "made the directory before refusing it")
        // A tmpfs is taken, mount point or not.
        let tmpfs = base + "/tmpfs"
        mkdir(tmpfs, 0o755)
        try #require(mount("tmpfs", tmpfs, "tmpfs", 0, "size=64k,mode=0755") == 0, "mount tmpfs: errno \(errno)")
        defer { umount2(tmpfs, Int32(MNT_DETACH)) }
        let locks = HeldLocks()
        let directory = try locks.takeDirectories(runtime: .init(path: tmpfs + "/run"), state: nil)
        #expect(directory.path == tmpfs + "/run")
        let type = try LocalFile.fileSystem(of: tmpfs + "/run")
        #expect(type == LocalFile.FileSystemType(magic: 0x0102_1994, name: "tmpfs", mountPoint: tmpfs))
        #expect(type.isLocal)
    }

    /// Bug B's second half: a state directory refused for its path used to be refused only
    /// after both directories were made, so root had already made the one behind the link (and
    /// the runtime directory). Now neither is made.
    @Test(.enabled(if: geteuid() == 0, "planting another uid's link needs root"))
    func aStateDirectoryRefusedForItsPathLeavesNoDirectoryBehind() throws {
        let base = temporaryDirectory("vigil-run")
        let victim = base + "/victim"
        mkdir(victim, 0o755)
        mkdir(base + "/att", 0o755)
        chown(base + "/att", 65_534, 65_534)
        symlink(victim, base + "/att/link")
        lchown(base + "/att/link", 65_534, 65_534)
        let error = #expect(throws: SystemError.self) {
            _ = try HeldLocks().takeDirectories(runtime: .init(path: base + "/run"), state: base + "/att/link/state")
        }
        #expect(
            error?.description.hasPrefix(
                "cannot use as the state directory \(base)/att/link/state: \(base)/att/link, on its path, is a symbolic link made by uid 65534"
            ) == true,
            "\(String(describing: error))"
        )
        #expect(!FileSystem.exists(victim + "/state"), "made the state directory behind the link")
        #expect(!FileSystem.exists(base + "/run"), "made the runtime directory of a run it refused")
    }

    /// A deadline missed while the runtime directory is checked names that directory, not the
    /// state directory (which the message named whenever the daemon kept state).
    @Test func theDirectoryInProgressIsTheOneBeingChecked() throws {
        let base = temporaryDirectory("vigil-run")
        final class Seen: Sendable {
            let locks = Mutex<HeldLocks?>(nil)
            let directory = Mutex<String?>(nil)
        }
        let seen = Seen()
        let held = HeldLocks { (path: String) throws(SystemError) in
            let locks = seen.locks.withLock { $0 }
            seen.directory.withLock { $0 = locks?.directoryInProgress }
            throw SystemError(path: path, operation: "check the file system of", errno: EIO)
        }
        seen.locks.withLock { $0 = held }
        #expect(throws: SystemError.self) {
            _ = try held.takeDirectories(runtime: .init(path: base + "/run"), state: base + "/state")
        }
        #expect(seen.directory.withLock { $0 } == base + "/run")
        seen.locks.withLock { $0 = nil }
    }

    @Test func mountinfoNamesTheMountOfADevice() {
        let mountinfo = """
            22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
            40 22 0:39 / /srv/with\\040space rw,nosuid - fuse.sshfs host:/ rw
            41 22 0:39 / /srv/with\\040space/inner rw - fuse.sshfs host:/ rw
            42 22 0:50 / /mnt/nfs rw shared:7 - nfs4 server:/export rw
            """
        let fuse = UInt64(39)
        #expect(LocalFile.mount(of: fuse, path: "/nonexistent-\(getpid())", in: mountinfo)?.type == "fuse.sshfs")
        #expect(
            LocalFile.mount(of: fuse, path: "/nonexistent-\(getpid())", in: mountinfo)?.point == "/srv/with space/inner"
        )
        let nfs = UInt64(50)
        #expect(LocalFile.mount(of: nfs, path: "/", in: mountinfo)?.type == "nfs4")
        #expect(
            LocalFile.mount(of: UInt64(254 << 8), path: "/", in: mountinfo).map { [$0.type, $0.point] } == [
                "ext4", "/",
            ]
        )
        #expect(LocalFile.mount(of: UInt64(7), path: "/", in: mountinfo) == nil)
    }
}
