import Glibc
import Testing
import VigilTesting

/// The end-to-end suite under a real systemd (`Tests/EndToEnd/run.sh`): it boots systemd 252 in
/// its own namespaces, installs this build's `vigild` as a unit, and checks start, the journal,
/// reloads, SIGUSR1, stop/start, kill -9 and the watchdog. Booting systemd needs root (CI runs
/// as root).
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
            outputPath: output
        )
        let status = try await suite.waitForExit(timeout: .seconds(300))
        let log = try String(contentsOfFile: output)
        let failures = log.split(separator: "\n").filter { $0.hasPrefix("FAIL") }
        #expect(status == 0, "end-to-end suite failed:\n\(log)")
        #expect(failures.isEmpty)
        #expect(log.contains(" passed, 0 failed"))
        print(log)
    }
}
