import Glibc
import Testing
import VigilPOSIX
import VigilTesting

@testable import VigilPersistence

/// The rule in ``TrustedDirectory``'s documentation, one case each (needs root to plant other
/// uids' directories; /run is root-owned and 0755 on any systemd-shaped host).
@Suite(.serialized, .enabled(if: getuid() == 0, "planting other uids' directories needs root"))
struct TrustedDirectoryTests {
    /// A fresh directory under /run (a root-owned, 0755 chain), removed afterwards.
    static func withRootChain(_ body: (String) throws -> Void) rethrows {
        var template = Array("/run/vigil-trust-XXXXXX".utf8CString)
        let base = String(cString: mkdtemp(&template)!)
        chmod(base, 0o755)
        defer {
            for name in ["dynamic/status.json", "dynamic", "open"] {
                unlink(base + "/" + name)
                rmdir(base + "/" + name)
            }
            rmdir(base)
        }
        try body(base)
    }

    /// `<base>/dynamic`, like /run/vigild: created by systemd for a DynamicUser, mode 0755.
    static func dynamicUserDirectory(in base: String) -> String {
        let path = base + "/dynamic"
        mkdir(path, 0o755)
        chown(path, 65_534, 65_534)
        return path
    }

    @Test func anotherUidsDirectoryIsTrustedOnlyUnderARootOwnedChain() throws {
        try Self.withRootChain { base in
            let dynamic = Self.dynamicUserDirectory(in: base)
            let directory = try TrustedDirectory.open(dynamic)
            #expect(directory.owner == 65_534)
            // …but not when a parent is open to others.
            chmod(base, 0o777)
            let error = #expect(throws: SystemError.self) { try TrustedDirectory.open(dynamic) }
            #expect(error?.errno == EPERM)
            #expect(error?.path == dynamic)
            #expect(
                error?.description
                    == "cannot use \(dynamic): it is owned by uid 65534, not by you or root, and its parent \(base) is writable by group or others (mode 0777)"
            )
        }
    }

    @Test func aGroupOrOtherWritableDirectoryOrASymlinkIsRefused() throws {
        try Self.withRootChain { base in
            let open = base + "/open"
            mkdir(open, 0o777)
            chmod(open, 0o777)
            let writable = #expect(throws: SystemError.self) { try TrustedDirectory.open(open) }
            #expect(writable?.errno == EPERM)
            #expect(writable?.detail == "it is writable by group or others (mode 0777)")
            rmdir(open)
            symlink("/etc", open)
            let link = #expect(throws: SystemError.self, "a symbolic link was followed") {
                try TrustedDirectory.open(open)
            }
            #expect(link?.errno == ELOOP)
            #expect(
                link?.description.hasPrefix("cannot use \(open): it is a symbolic link, and not one systemd made")
                    == true
            )
        }
    }

    @Test func filesAreReadOnlyWhenRegularOwnedAndSmall() throws {
        try Self.withRootChain { base in
            let path = Self.dynamicUserDirectory(in: base)
            let directory = try TrustedDirectory.open(path)
            TextFile.write(path + "/status.json", "{}")
            #expect(try directory.read("status.json") == Array("{}".utf8))
            chown(path + "/status.json", 1234, 1234)
            let owner = #expect(throws: SystemError.self) { try directory.read("status.json") }
            #expect(owner?.errno == EPERM)
            #expect(owner?.path == path + "/status.json")
            chown(path + "/status.json", 65_534, 65_534)
            let large = #expect(throws: SystemError.self) { try directory.read("status.json", limit: 1) }
            #expect(large?.errno == EFBIG)
            unlink(path + "/status.json")
            mkfifo(path + "/status.json", 0o600)
            // A FIFO neither blocks the reader nor is read.
            let fifo = #expect(throws: SystemError.self) { try directory.read("status.json") }
            #expect(fifo?.errno == EINVAL)
            #expect(fifo?.detail == "it is a FIFO (named pipe), not a regular file")
            unlink(path + "/status.json")
            symlink("/etc/passwd", path + "/status.json")
            let link = #expect(throws: SystemError.self) { try directory.read("status.json") }
            #expect(link?.errno == ELOOP)
            #expect(link?.description == "cannot read \(path)/status.json: it is a symbolic link")
        }
    }
}
