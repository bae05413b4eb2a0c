import Glibc
import VigilTesting

/// The `vigild` built next to this test bundle (`swift test` builds it: the test target
/// depends on it).
enum VigildBinary {
    static var path: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        precondition(length > 0, "cannot read /proc/self/exe")
        var directory = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        while !directory.hasSuffix("/") { directory.removeLast() }
        // The runner may be inside the .xctest bundle (Linux builds it as a plain executable).
        for candidate in [directory + "vigild", directory + "../vigild"] where access(candidate, X_OK) == 0 {
            return candidate
        }
        preconditionFailure("vigild not found next to \(directory); build it with `swift build`")
    }

    /// A fresh directory for one test's files.
    static func temporaryDirectory() -> String {
        var template = Array("/tmp/vigild-test-XXXXXX".utf8CString)
        return String(cString: mkdtemp(&template)!)
    }

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
