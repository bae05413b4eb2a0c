import VigilPlatform

/// The executables that `swift build` builds next to the test bundle (the tests' probes).
public enum BuiltExecutable {
    /// The path of executable `name` beside the running test bundle; stops the tests with what to
    /// do when it has not been built.
    public static func path(of name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        precondition(length > 0, "cannot read /proc/self/exe")
        var directory = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        while !directory.hasSuffix("/") { directory.removeLast() }
        for candidate in [directory + name, directory + "../" + name] where access(candidate, X_OK) == 0 {
            return candidate
        }
        preconditionFailure("\(name) not found next to \(directory); build it with `swift build`")
    }
}
