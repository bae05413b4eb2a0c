import Glibc
import Testing
import VigilTesting

/// vigild in a user namespace that does not map the host's root (`unshare -r` run by another
/// user, a rootless container, `PrivateUsers=self`): root's directories above the state
/// directory show there as the overflow uid (65534). The state directory's parent check took
/// them for another user's and refused every path (a reviewer's find); they count as root's.
@Suite(.serialized) struct UserNamespaceProcessTests {
    @Test func aStateDirectoryUnderRootsDirectoriesIsTakenInAnUnmappedNamespace() async throws {
        try #require(geteuid() == 0, "needs root to run vigild as another user")
        var template = Array("/tmp/vigil-userns-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }
        let directory = try #require(made.map { String(cString: $0) })
        // Its own directory, in root's sticky /tmp: in the namespace /tmp is owned by 65534.
        chown(directory, 12_345, 12_345)
        let log = directory + "/output.log"
        let daemon = try DaemonProcess(
            executable: "/usr/bin/setpriv",
            arguments: [
                "--reuid", "12345", "--regid", "12345", "--clear-groups", "/usr/bin/unshare", "--map-root-user",
                VigildBinary.path, "run", "--state-directory", directory + "/state", "--runtime-directory",
                directory + "/run",
            ],
            environment: ["NOTIFY_SOCKET": "", "JOURNAL_STREAM": ""],
            outputPath: log
        )
        try await poll(for: "vigild's start or its end (\(log))") { () -> Bool? in
            let output = TextFile.read(log) ?? ""
            return output.contains("Started") || daemon.exitStatus != nil ? true : nil
        }
        #expect(daemon.exitStatus == nil, "\(TextFile.read(log) ?? "")")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0, "\(TextFile.read(log) ?? "")")
        _ = try await DaemonProcess(executable: "/bin/rm", arguments: ["-rf", directory]).waitForExit()
    }
}
