// swift-format-ignore-file
// (The snippet stays exactly as the article shows it.)
// TestingADaemon.md's example, verbatim: a test, so it runs as well as compiles
// (ReadmeSnippetTests checks that the article's block appears here line for line). The snippets
// that begin with `import` (README.md, the other DocC articles) are whole programs:
// Tests/Snippets/run.sh builds each one alone as the main.swift of a package of its own.
import Testing
import Vigil
import VigilTesting

@Test func aRejectedReloadKeepsTheOldGeneration() async throws {
    let log = AsyncRecorder<RecordingListener.Call>()
    let worker = RecordingListener("worker", log: log, decision: .reject(reason: "not now"))
    try await withRunningDaemon(listeners: [worker]) { daemon in
        daemon.group.requestReload()
        try await daemon.observer.records.wait("the rejection") {
            $0.contains { if case .reloadRejected = $0 { true } else { false } }
        }
        #expect(daemon.group.context.generation == 1)
        #expect(log.values.contains("worker.prepare"))
    }
}
