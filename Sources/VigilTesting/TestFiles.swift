import VigilPlatform

/// A listener's persisted value in the state-store and listener tests: `{"count": N}`.
package struct Counter: Codable, Equatable, Sendable {
    package var count: Int
    package init(count: Int) { self.count = count }
}

/// A new, empty directory under `/tmp` for one test.
package func temporaryDirectory() -> String {
    var template = Array("/tmp/vigil-state-XXXXXX".utf8CString)
    guard let path = mkdtemp(&template) else {
        preconditionFailure("cannot create a directory under /tmp: \(String(cString: strerror(errno)))")
    }
    return String(cString: path)
}

/// Replaces the file at `path` with `text`.
package func writeFile(_ path: String, _ text: String) { TextFile.write(path, text) }

/// The file at `path`, or `nil` when it cannot be read.
package func readFile(_ path: String) -> String? { TextFile.read(path) }
