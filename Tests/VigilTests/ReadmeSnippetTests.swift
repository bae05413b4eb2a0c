import Testing
import VigilTesting

/// The testing article's example runs: it must appear, line for line (indentation aside), in
/// ReadmeSnippets.swift, which the test build compiles and runs. Every block that begins with
/// `import` (README.md, WritingADaemon.md, …) is a whole program instead, built alone by
/// Tests/Snippets/run.sh; this test checks that the documents still have such programs.
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

    /// Whether a block (as written, before `normalized`) is a whole program.
    static func isProgram(_ markdown: String, block index: Int) -> Bool {
        var count = -1
        var first = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```swift") {
                count += 1
                first = true
            } else if first {
                if count == index { return line.hasPrefix("import ") }
                first = false
            }
        }
        return false
    }

    @Test func theTestingArticlesExampleIsATestThatRuns() throws {
        let document = "Sources/Vigil/Vigil.docc/TestingADaemon.md"
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

    /// README.md and WritingADaemon.md open with whole programs (Tests/Snippets/run.sh builds them).
    @Test(arguments: ["README.md", "Sources/Vigil/Vigil.docc/WritingADaemon.md"])
    func theGuidesShowWholePrograms(document: String) throws {
        let markdown = try #require(TextFile.read(Self.project + "/" + document))
        #expect(Self.isProgram(markdown, block: 0) || Self.isProgram(markdown, block: 1))
        #expect(markdown.contains("DefaultedConfiguration") || document != "README.md")
    }
}
