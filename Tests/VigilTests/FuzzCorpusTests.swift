import Testing
import Vigil
import VigilFuzzTargets

/// Every committed seed under Tests/Fuzz/<target>/corpus/ — valid documents, edge cases and the
/// reproductions of issue 10 — through the same function its fuzzer runs, so that the corpus
/// stays a regression suite in `swift test` (a trap there fails the run).
@Suite struct FuzzCorpusTests {
    /// …/Tests/VigilTests/FuzzCorpusTests.swift → …/Tests/Fuzz
    static let fuzzDirectory: String = {
        var path = Substring(#filePath)
        for _ in 0..<2 { path = path[..<(path.lastIndex(of: "/") ?? path.startIndex)] }
        return path + "/Fuzz"
    }()

    @Test(arguments: FuzzTargets.all.map(\.directory))
    func replaysTheCorpus(of directory: String) throws {
        let run = try #require(FuzzTargets.target(named: directory)?.run)
        let files = FuzzTargets.files(in: Self.fuzzDirectory + "/" + directory + "/corpus")
        #expect(files.count >= 10, "the corpus of \(directory) is missing or nearly empty: \(files)")
        for file in files { run(try FileSystem.read(file)) }
    }
}
