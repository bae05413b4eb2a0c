import Vigil
import VigilPlatform
import VigildCore

/// What the fuzzers (Tests/Fuzz/run.sh) and the corpus replay test (`swift test`) run on
/// arbitrary bytes. Each function must return for every input: a trap is the bug being looked
/// for. Where a cheap invariant exists, its violation is a `fatalError`, so that the fuzzer
/// reports it like a crash.
package enum FuzzTargets {
    /// One fuzz target: its corpus directory under Tests/Fuzz/ and what it runs.
    package struct Target: Sendable {
        package var directory: String
        package var run: @Sendable ([UInt8]) -> Void
    }

    /// Every target, in the order run.sh runs them.
    package static let all: [Target] = [
        Target(directory: "JSONParser", run: parseJSON),
        Target(directory: "Configuration", run: decodeConfiguration),
        Target(directory: "StateFile", run: restoreState),
    ]

    /// The target whose corpus directory is `name`.
    package static func target(named name: String) -> Target? { all.first { $0.directory == name } }

    /// (a) The JSON parser alone. A syntax error must have a message and a position; a parsed
    /// document must come back unchanged through ``JSONWriter`` (compact and pretty), its pretty
    /// text within a constant factor of the compact one.
    package static func parseJSON(_ bytes: [UInt8]) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            guard !error.message.isEmpty, error.position.line >= 1, error.position.column >= 1 else {
                fatalError("a syntax error without a message or a position: \(error)")
            }
            return
        }
        for pretty in [false, true] {
            let text = JSONWriter.write(value, pretty: pretty)
            let again: JSONValue
            do {
                again = try JSONParser.parse(Array(text.utf8))
            } catch {
                fatalError("the parser refuses what JSONWriter wrote (\(error)): \(text.prefix(300))")
            }
            guard sameContent(again, value) else {
                fatalError("a round trip through JSONWriter changed the document: \(text.prefix(300))")
            }
        }
        // Pretty text is within a constant factor of the compact text, whatever the nesting (it
        // grew with its square), and the compact pass tells its size to the byte.
        let compact = JSONWriter.bytes(value, pretty: false)
        let pretty = JSONWriter.bytes(value)
        guard pretty.count <= (2 * JSONWriter.indentedDepth + 3) * compact.count else {
            fatalError("pretty text of \(pretty.count) bytes for \(compact.count) compact ones")
        }
        guard JSONWriter.compact(value, limit: .max)?.prettyCount == pretty.count else {
            fatalError(
                "the compact pass measured the pretty text wrong: \(String(decoding: compact.prefix(300), as: UTF8.self))"
            )
        }
    }

    /// (b) The configuration path of vigild: parse, decode (unknown keys rejected), validate.
    /// A failure must be a ``ConfigurationError`` that names the file.
    package static func decodeConfiguration(_ bytes: [UInt8]) {
        let file = "/etc/vigild/vigild.json"
        do {
            let configuration = try ConfigurationLoader<VigildConfiguration>().decode(bytes, file: file)
            // What vigild does next with an accepted configuration must not trap either.
            _ = Duration.seconds(fractional: configuration.heartbeat.interval)
            _ = Duration.seconds(fractional: configuration.persistence.checkpointInterval)
        } catch {
            guard error.description.hasPrefix(file + ":") else {
                fatalError("a configuration error that does not start with the file: \(error.description)")
            }
        }
    }

    /// (c) The state file: bytes → `StateStore.parse` (what opening the store does) → what a
    /// checkpoint writes of it, and the heartbeat's count, decoded the way vigild reads it.
    package static func restoreState(_ bytes: [UInt8]) {
        guard let contents = try? StateStore.parse(bytes) else { return }
        // What a checkpoint writes of it reads back as the same state, and is at most twice its
        // compact text (or 64 KiB), whatever its nesting.
        let document = JSONValue(
            .object([.init(key: "formatVersion", value: JSONValue(.number("1")))] + contents.entries)
        )
        if let text = StateStore.text(of: contents.entries) {
            guard let again = try? StateStore.parse(text), again.entries.count == contents.entries.count,
                zip(again.entries, contents.entries).allSatisfy({ $0.key == $1.key && sameContent($0.value, $1.value) })
            else {
                fatalError("a checkpoint's text does not read back as the state: \(text.prefix(300))")
            }
            let compact = JSONWriter.bytes(document, pretty: false).count
            guard text.count <= max(2 * compact, StateStore.readableSize) else {
                fatalError("a checkpoint's text of \(text.count) bytes for \(compact) compact ones")
            }
        }
        guard let stored = contents.entries.last(where: { $0.key == "heartbeat" })?.value else { return }
        guard
            let heartbeat = try? JSONValueDecoder.decode(
                StateDocument.Heartbeat.self,
                from: stored,
                rejectUnknownKeys: false
            )
        else {
            return
        }
        let state = StateDocument(formatVersion: StateStore.formatVersion, heartbeat: heartbeat)
        // What was restored can be stored again.
        do {
            let text = JSONWriter.write(try JSONValueEncoder.encode(state))
            _ = try StateDocument.restore(Array(text.utf8))
        } catch {
            fatalError("a restored state does not survive being written again: \(error)")
        }
    }

    /// The state file's shape as vigild uses it: `{"formatVersion": 1, "heartbeat": {"count": N}}`.
    struct StateDocument: Codable {
        struct Heartbeat: Codable { var count: Int }
        var formatVersion: Int
        var heartbeat: Heartbeat?

        static func restore(_ bytes: [UInt8]) throws -> StateDocument {
            try JSONValueDecoder.decode(StateDocument.self, from: try JSONParser.parse(bytes), rejectUnknownKeys: false)
        }
    }

    /// `true` when `a` and `b` hold the same values (positions aside).
    package static func sameContent(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a.kind, b.kind) {
        case (.object(let left), .object(let right)):
            return left.count == right.count
                && zip(left, right).allSatisfy { $0.key == $1.key && sameContent($0.value, $1.value) }
        case (.array(let left), .array(let right)):
            return left.count == right.count && zip(left, right).allSatisfy { sameContent($0, $1) }
        case (.string(let left), .string(let right)):
            // Scalar by scalar: `==` on String would equate canonically equivalent texts.
            return left.unicodeScalars.elementsEqual(right.unicodeScalars)
        default:
            return a.kind == b.kind
        }
    }

    /// The bytes libFuzzer hands over.
    package static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// Runs `target` on each file (a crash the fuzzer saved, or a corpus), printing its name first.
    package static func replay(_ paths: some Sequence<String>, through target: ([UInt8]) -> Void) throws {
        for path in paths {
            print("replaying \(path)")
            target(try FileSystem.read(path))
        }
    }

    /// The regular files in `directory`, sorted by name; `[]` when it cannot be read.
    package static func files(in directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard entry.pointee.d_type == UInt8(DT_REG) else { continue }
            names.append(name)
        }
        return names.sorted().map { directory + "/" + $0 }
    }
}
