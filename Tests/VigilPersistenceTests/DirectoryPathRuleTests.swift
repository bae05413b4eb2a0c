import Glibc
import Testing
import VigilPOSIX
import VigilPersistence
import VigilTesting

/// ``DirectoryPathRule`` for the runtime directory, as it was for the state directory: a link
/// another user made on the path, or a parent another user may change, is refused before
/// anything is made (a security review: root made `victim/r` through `att/link/r`, a link
/// `nobody` put in a directory of theirs, and wrote status.json and instance.lock there).
@Suite(.serialized, .enabled(if: geteuid() == 0, "planting other uids' links needs root"))
struct DirectoryPathRuleTests {
    /// `base/att` owned by nobody, holding `link` (nobody's) to `base/victim` (root's, empty).
    private static func plantedLink() -> (base: String, victim: String, link: String) {
        let base = temporaryDirectory("vigil-path")
        let victim = base + "/victim"
        mkdir(victim, 0o755)
        let att = base + "/att"
        mkdir(att, 0o755)
        chown(att, 65_534, 65_534)
        symlink(victim, att + "/link")
        lchown(att + "/link", 65_534, 65_534)
        return (base, victim, att + "/link")
    }

    private static func isEmpty(_ directory: String) -> Bool {
        guard let stream = opendir(directory) else { return false }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.isEmpty
    }

    @Test func aRuntimeDirectoryThroughAnotherUsersLinkIsRefusedAndNothingIsMadeBehindIt() throws {
        let (_, victim, link) = Self.plantedLink()
        let error = #expect(throws: SystemError.self) { _ = try TrustedDirectory.create(link + "/r") }
        #expect(
            error?.description
                == "cannot use as the runtime directory \(link)/r: \(link), on its path, is a symbolic link made by uid 65534, not by this process (uid 0) or root, so that user chooses where it leads; give the directory itself",
            "\(String(describing: error))"
        )
        #expect(Self.isEmpty(victim), "a directory was made behind the link")
        // Deeper under the link, and the link itself as the directory: the same.
        #expect(throws: SystemError.self) { _ = try TrustedDirectory.create(link + "/a/b") }
        #expect(Self.isEmpty(victim))
        // A "/" before a combining mark is one Swift Character with it; the kernel splits there
        // all the same. Split by Character, the link was never looked at and root made the
        // directory behind it (a review found it).
        #expect(throws: SystemError.self) { _ = try TrustedDirectory.create(link + "/\u{301}r") }
        #expect(throws: SystemError.self) { try DirectoryPathRule.create(link + "/\u{301}s", role: .state) }
        #expect(Self.isEmpty(victim), "a directory was made behind the link")
        let itself = #expect(throws: SystemError.self) { _ = try TrustedDirectory.create(link) }
        #expect(itself?.description.contains("\(link): it is a symbolic link made by uid 65534") == true)
        // Root's own link to the same place is followed, as before.
        let base = FileSystem.parent(of: FileSystem.parent(of: link))
        symlink(victim, base + "/mine")
        let directory = try TrustedDirectory.create(base + "/mine/r")
        #expect(directory.owner == 0)
        #expect(FileSystem.exists(victim + "/r"))
    }

    @Test func aRuntimeDirectoryUnderAParentAnotherUserOwnsIsRefusedBeforeItIsMade() throws {
        let base = temporaryDirectory("vigil-path")
        let theirs = base + "/theirs"
        mkdir(theirs, 0o755)
        chown(theirs, 65_534, 65_534)
        let error = #expect(throws: SystemError.self) { _ = try TrustedDirectory.create(theirs + "/x/run") }
        #expect(
            error?.description
                == "cannot use as the runtime directory \(theirs)/x/run: \(theirs), above it, is owned by uid 65534, not by this process (uid 0) or root: that user could rename the runtime directory away and put their own in its place; use a directory whose parents only root or this user may change",
            "\(String(describing: error))"
        )
        #expect(Self.isEmpty(theirs), "a directory was made in another user's directory")
        // A parent anyone may write without the sticky bit: refused; with it (/tmp): taken.
        let open = base + "/open"
        mkdir(open, 0o777)
        chmod(open, 0o777)
        #expect(throws: SystemError.self) { _ = try TrustedDirectory.create(open + "/run") }
        #expect(Self.isEmpty(open))
        chmod(open, 0o1777)
        #expect(throws: Never.self) { _ = try TrustedDirectory.create(open + "/run") }
    }

    /// The state directory's check before anything is made: the same rule, the same words as
    /// after (`StateStore.checkOwnership`), without the directory.
    @Test func theStateDirectorysPathIsCheckedBeforeItExists() throws {
        let (_, victim, link) = Self.plantedLink()
        let error = #expect(throws: SystemError.self) {
            try DirectoryPathRule.check(link + "/state", role: .state)
        }
        #expect(
            error?.description.hasPrefix(
                "cannot use as the state directory \(link)/state: \(link), on its path, is a symbolic link made by uid 65534"
            ) == true,
            "\(String(describing: error))"
        )
        let created = #expect(throws: SystemError.self) { try DirectoryPathRule.create(link + "/state", role: .state) }
        #expect(created?.errno == ELOOP)
        #expect(Self.isEmpty(victim))
        // A path that does not exist yet under good parents passes, and is made.
        let base = temporaryDirectory("vigil-path")
        #expect(throws: Never.self) { try DirectoryPathRule.check(base + "/a/b/state", role: .state) }
        try DirectoryPathRule.create(base + "/a/b/state", role: .state)
        #expect(FileSystem.exists(base + "/a/b/state"))
    }

    /// Each directory on the way is checked once it exists and before anything is made in it:
    /// one that turns out to be another user's (planted between the check and the `mkdir`, in
    /// a sticky directory) stops the walk there.
    @Test func makeDirectoriesChecksEachDirectoryBeforeMakingInIt() throws {
        let base = temporaryDirectory("vigil-path")
        var seen: [String] = []
        try FileSystem.makeDirectories(base + "/a/b") { (directory: String) throws(SystemError) in
            seen.append(directory)
        }
        #expect(seen.suffix(2) == [base + "/a", base + "/a/b"])
        let stop = SystemError(path: base + "/c", operation: "use", errno: EPERM)
        let error = #expect(throws: SystemError.self) {
            try FileSystem.makeDirectories(base + "/c/d") { (directory: String) throws(SystemError) in
                if directory == base + "/c" { throw stop }
            }
        }
        #expect(error == stop)
        #expect(FileSystem.exists(base + "/c"))
        #expect(!FileSystem.exists(base + "/c/d"), "made a directory in one its check refused")
    }
}
