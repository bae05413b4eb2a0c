import Glibc
import Testing
import Vigil
import VigilTesting

/// A security review's reproduction, as root: `nobody` owns `att` and puts a link in it,
/// `att/link` to a directory of root's; `vigild run --runtime-directory att/link/r` made
/// `victim/r` and wrote status.json and instance.lock there, and the same path as
/// `--state-directory` was refused only after root had made the directory behind the link.
/// Both are now refused before anything is made, naming the link and its owner.
@Suite(.serialized, .enabled(if: geteuid() == 0, "acting as nobody needs root"))
struct DirectoryLinkProcessTests {
    /// `base/att` (nobody's) holding `link` that nobody made, to root's empty `base/victim`.
    private static func plant() async throws -> (base: String, victim: String, link: String) {
        let base = VigildBinary.temporaryDirectory()
        chmod(base, 0o755)  // nobody must reach att
        let victim = base + "/victim"
        mkdir(victim, 0o755)
        mkdir(base + "/att", 0o755)
        chown(base + "/att", 65_534, 65_534)
        let link = base + "/att/link"
        let ln = try DaemonProcess(
            executable: "/usr/bin/setpriv",
            arguments: ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/ln", "-s", victim, link]
        )
        try #require(try await ln.waitForExit() == 0)
        var info = stat()
        try #require(lstat(link, &info) == 0 && info.st_uid == 65_534, "nobody's link")
        return (base, victim, link)
    }

    private static func run(_ arguments: [String], log: String) async throws -> (status: Int32, output: String) {
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run"] + arguments,
            outputPath: log
        )
        let status = try await daemon.waitForExit(timeout: .seconds(20))
        return (status, TextFile.read(log) ?? "")
    }

    private static func entries(_ directory: String) -> [String] {
        guard let stream = opendir(directory) else { return ["(cannot open)"] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    @Test func aRuntimeDirectoryThroughAnotherUsersLinkIsRefusedAndNothingIsWrittenBehindIt() async throws {
        let (base, victim, link) = try await Self.plant()
        let (status, output) = try await Self.run(
            ["--runtime-directory", link + "/r", "--state-directory", base + "/state"],
            log: base + "/runtime.log"
        )
        #expect(status == 1, "\(output)")
        #expect(
            output.contains(
                "cannot use as the runtime directory \(link)/r: \(link), on its path, is a symbolic link made by uid 65534, not by this process (uid 0) or root, so that user chooses where it leads; give the directory itself"
            ),
            "\(output)"
        )
        #expect(Self.entries(victim).isEmpty, "root made \(Self.entries(victim)) behind nobody's link")
        #expect(!FileSystem.exists(base + "/state"), "the state directory of a refused run was made")
    }

    @Test func aStateDirectoryThroughAnotherUsersLinkIsRefusedBeforeAnythingIsMade() async throws {
        let (base, victim, link) = try await Self.plant()
        let (status, output) = try await Self.run(
            ["--runtime-directory", base + "/run", "--state-directory", link + "/s"],
            log: base + "/state.log"
        )
        #expect(status == 1, "\(output)")
        #expect(
            output.contains(
                "cannot use as the state directory \(link)/s: \(link), on its path, is a symbolic link made by uid 65534"
            ),
            "\(output)"
        )
        #expect(Self.entries(victim).isEmpty, "root made \(Self.entries(victim)) behind nobody's link")
        #expect(!FileSystem.exists(base + "/run"), "the runtime directory of a refused run was made")
    }
}
