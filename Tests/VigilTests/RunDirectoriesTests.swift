import Glibc
import Testing
import VigilTesting

@testable import Vigil

/// What `run` checks before it makes its directories (``HeldLocks/takeDirectories(runtime:state:)``):
/// both directories' path rule, for both before either is made.
@Suite(.serialized) struct RunDirectoriesTests {
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
}
