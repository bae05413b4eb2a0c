import VigilPlatform

/// Reading and writing small text files in tests, without Foundation.
public enum TextFile {
    /// The file's contents, or `nil` when it cannot be opened.
    public static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Replaces the file's contents with `text`.
    public static func write(_ path: String, _ text: String) {
        guard let file = fopen(path, "w") else { preconditionFailure("cannot write \(path)") }
        fputs(text, file)
        fclose(file)
    }
}
