// swift-format-ignore-file
// (The snippets stay exactly as the README shows them.)
// The Swift snippets of README.md and of the DocC articles WritingADaemon.md and
// TestingADaemon.md, verbatim, so that the test build compiles them (ReadmeSnippetTests checks
// that every ```swift block of those documents appears here line for line; `import` lines aside).
// A daemon's snippets are never run: each is wrapped in a function nobody calls; the testing
// article's example is a test and runs. Names a snippet
// leaves to the reader (`Config`, `MyConfiguration`) are defined around it.
import Glibc
import Vigil
import Testing
import VigilTesting  // SampleConfiguration stands in for `MyConfiguration`; the testing article uses the kit

enum ReadmeSnippet1 {
    struct Config: Listener { let name = "config" }

    static func main() async {
        struct Worker: Listener {
            let name = "worker"
            let dependencies = ["config"]          // starts after "config", stops before it

            func start(context: ListenerContext) async throws { /* … */ }
            func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
                .accept                            // or .reject(reason: "heartbeat.interval must be > 0")
            }
            func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws { /* apply */ }
            func terminate(reason: TerminationReason, context: ListenerContext) async throws { /* flush */ }
        }

        let logging = Daemon.bootstrapLogging(identifier: "mydaemon")
        let daemon = Daemon(identifier: "mydaemon", version: "1.0", listeners: [Config(), Worker()], logging: logging)
        exit(await daemon.run())
    }
}

enum ReadmeSnippet2 {
    typealias MyConfiguration = SampleConfiguration
    struct Worker: Listener {
        let name = "worker"
        let dependencies = ["configuration"]
    }

    static func main() {
        let commandLine = DaemonCommandLine(
            name: "mydaemon", version: "1.0", abstract: "Does my work.", configuration: MyConfiguration.self)
        EventLoopExecutor.run {
            await commandLine.main { options in
                let config = ConfigurationListener<MyConfiguration>(source: options.configurationSource)
                let state = PersistenceListener<MyConfiguration>(path: options.stateFile, checkpointInterval: { _ in .seconds(30) })
                return Daemon(identifier: options.name, version: options.version,
                              listeners: [config, state, Worker()], logging: options.logging)
            }
        }
    }
}

// TestingADaemon.md's example: a real test, so it runs as well as compiles.
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
