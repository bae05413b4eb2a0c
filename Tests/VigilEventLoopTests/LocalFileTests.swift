import Glibc
import Testing
import VigilEventLoop
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// `LocalFile` opens in place only what no network or user-space file system can stall: a path
/// that stays on one mount whose file system is local. Everything else goes to the helper
/// thread (the hung-FUSE process tests show that path keeps the daemon answering).
@Suite(.serialized) struct LocalFileTests {
    /// Whether the root mount's file system is one `LocalFile` trusts, by its name in
    /// /proc/self/mountinfo (an oracle independent of the magic numbers the C code checks).
    private static var rootIsLocal: Bool {
        let lines = (readFile("/proc/self/mountinfo") ?? "").split(separator: "\n")
        // The last line whose mount point (fifth field) is "/" is the one in force.
        guard let root = lines.last(where: { $0.split(separator: " ").dropFirst(4).first == "/" }) else { return false }
        // After the optional fields comes "-", then the file system type.
        let fields = root.split(separator: " ")
        guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { return false }
        let type = fields[dash + 1]
        return ["ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "ramfs"].contains(String(type))
    }

    /// Whether `path` is on the same mount as `/` (same device; no mount point on the way is
    /// assumed for the fixtures below, which sit in a directory made here).
    private static func onRootMount(_ path: String) -> Bool {
        var root = stat()
        var file = stat()
        return stat("/", &root) == 0 && stat(path, &file) == 0 && root.st_dev == file.st_dev
    }

    /// What `LocalFile` opened at `path`, read; `nil` when it did not open it.
    private static func readInPlace(_ path: String) throws -> [UInt8]? {
        guard let opened = LocalFile.open(path, flags: FileSystem.readFlags()) else { return nil }
        return try FileSystem.read(opened: opened, path: path, limit: 1024)
    }

    @Test func aFileOnTheRootMountOpensInPlaceExactlyWhenTheRootIsLocal() throws {
        let directory = temporaryDirectory()
        let path = directory + "/config.json"
        writeFile(path, "{}")
        let expected = Self.onRootMount(path) && Self.rootIsLocal
        let read = try Self.readInPlace(path)
        #expect(
            read == (expected ? Array("{}".utf8) : nil),
            "root local: \(Self.rootIsLocal), \(path) on the root mount: \(Self.onRootMount(path))"
        )
    }

    @Test func aPathThatCrossesIntoAnotherMountIsNotOpenedInPlace() throws {
        let directory = temporaryDirectory()
        let mountpoint = directory + "/mnt"
        mkdir(mountpoint, 0o755)
        // A tmpfs is local, but it is another mount: resolution from / would cross into it.
        try #require(mount("tmpfs", mountpoint, "tmpfs", 0, "size=64k") == 0, "mount tmpfs: errno \(errno)")
        defer { umount2(mountpoint, Int32(MNT_DETACH)) }
        writeFile(mountpoint + "/config.json", "{}")
        #expect(try Self.readInPlace(mountpoint + "/config.json") == nil)
        // Nor through a symbolic link that leads there.
        symlink(mountpoint + "/config.json", directory + "/link.json")
        #expect(try Self.readInPlace(directory + "/link.json") == nil)
        // The slow path still reads it.
        #expect(try FileSystem.read(directory + "/link.json") == Array("{}".utf8))
    }

    @Test func aMissingFileIsLeftToTheSlowPath() {
        let directory = temporaryDirectory()
        #expect((try? Self.readInPlace(directory + "/absent.json")) == .some(nil))
    }
}
