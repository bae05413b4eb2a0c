import Glibc
import VigilTesting

/// The `vigild` built next to this test bundle (`swift test` builds every target; the test
/// target does not depend on it, so that vigild's early signal block stays out of the runner).
enum VigildBinary {
    static var path: String { BuiltExecutable.path(of: "vigild") }

    /// A fresh directory for one test's files.
    static func temporaryDirectory() -> String { VigilTesting.temporaryDirectory("vigild-test") }

    /// Starts vigild with a fake notify socket, its state and runtime directories under
    /// `directory` (default: a fresh one); returns once it reported READY=1.
    static func start(
        socket: FakeNotifySocket,
        arguments: [String] = [],
        environment: [String: String] = [:],
        directory: String = temporaryDirectory()
    ) async throws -> (DaemonProcess, String) {
        var environment = environment
        environment["NOTIFY_SOCKET"] = socket.path
        // The process systemd started, whatever the test runner inherited (unset or empty:
        // this process); a test that wants another sets it.
        environment["SYSTEMD_EXEC_PID"] = environment["SYSTEMD_EXEC_PID"] ?? ""
        let process = try DaemonProcess(
            executable: path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run"]
                + arguments,
            environment: environment,
            outputPath: directory + "/output.log"
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        return (process, directory)
    }
}
