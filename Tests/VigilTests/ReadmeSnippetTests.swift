import Testing
import VigilTesting

/// Every ```swift block of README.md and of the DocC articles that show Vigil's own API compiles:
/// it must appear, line for line (indentation and `import` lines aside), in ReadmeSnippets.swift,
/// which the test build compiles. (Readiness.md and SocketActivation.md show Hummingbird code;
/// Examples/hello-http compiles that.)
@Suite struct ReadmeSnippetTests {
    static let project: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// Lines without surrounding spaces, empty and `import` lines dropped.
    static func normalized(_ lines: some Sequence<Substring>) -> [String] {
        lines.map { line in
            var line = line
            while line.first == " " { line.removeFirst() }
            while line.last == " " { line.removeLast() }
            return String(line)
        }.filter { !$0.isEmpty && !$0.hasPrefix("import ") }
    }

    /// The ```swift blocks of a Markdown text.
    static func swiftBlocks(_ markdown: String) -> [[String]] {
        var blocks: [[Substring]] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```swift") {
                current = []
            } else if current != nil, line.hasPrefix("```") {
                blocks.append(current!)
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks.map { normalized($0) }
    }

    @Test(arguments: [
        "README.md", "Sources/Vigil/Vigil.docc/WritingADaemon.md", "Sources/Vigil/Vigil.docc/TestingADaemon.md",
    ])
    func everySwiftBlockIsCompiled(document: String) throws {
        let markdown = try #require(TextFile.read(Self.project + "/" + document))
        let compiled = try #require(TextFile.read(Self.project + "/Tests/VigilTests/ReadmeSnippets.swift"))
        let lines = Self.normalized(compiled.split(separator: "\n", omittingEmptySubsequences: false))
        let blocks = Self.swiftBlocks(markdown)
        #expect(blocks.count >= 1)
        for block in blocks {
            let found = (0...max(0, lines.count - block.count)).contains { start in
                Array(lines[start..<min(lines.count, start + block.count)]) == block
            }
            #expect(
                found,
                "this snippet of \(document) is not in ReadmeSnippets.swift:\n\(block.joined(separator: "\n"))"
            )
        }
    }
}
