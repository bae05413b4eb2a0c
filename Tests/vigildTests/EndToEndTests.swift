import Glibc
import Testing
import VigilTesting

/// The end-to-end suite under a real systemd (`Tests/EndToEnd/run.sh`): it boots systemd 252, 254
/// and 257 at once, each in its own namespaces, installs this build's `vigild` as a unit, and
/// checks start, the journal, reloads, SIGUSR1, stop/start, kill -9, the watchdog and the rest on
/// each. Booting systemd needs root (CI runs as root). The time limit leaves room for the first
/// run on a fresh machine, which makes the Debian 13 root for 257 (about 5 minutes).
@Suite(.serialized) struct EndToEndTests {
    static var projectDirectory: String {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }

    @Test(.enabled(if: getuid() == 0, "booting systemd in namespaces needs root"))
    func vigildUnderARealSystemd() async throws {
        let output = VigildBinary.temporaryDirectory() + "/e2e.log"
        let suite = try DaemonProcess(
            executable: "/bin/bash",
            arguments: [Self.projectDirectory + "/Tests/EndToEnd/run.sh", VigildBinary.path],
            outputPath: output,
            // A `kill 0` in a script (a pid read as 0 from a unit that is not running) signals
            // the script's process group: its own, not this runner's.
            ownProcessGroup: true
        )
        let status = try await suite.waitForExit(timeout: .seconds(900))
        let log = try String(contentsOfFile: output)
        let failures = log.split(separator: "\n").filter { $0.hasPrefix("FAIL") }
        #expect(status == 0, "end-to-end suite failed:\n\(log)")
        #expect(failures.isEmpty)
        #expect(log.contains(" passed, 0 failed"))
        print(log)
    }
}
