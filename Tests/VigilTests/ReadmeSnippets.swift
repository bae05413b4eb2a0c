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

// WritingADaemon.md, "Socket activation": the accept sequence in a ServiceListener's part.
enum ReadmeSnippetAcceptedConnections {
    static func serve(_ socket: ListeningSocket, ready: ReadySignal) async throws {
        let connections = try socket.connections()
        ready.onStop { deadline in connections.stop(deadline: deadline) }
        ready()
        for try await connection in connections { /* serve it in a child task */ }
    }

    // SocketActivation.md (not checked line for line there: that article shows SwiftNIO too).
    static func answer(_ line: String) -> String { line }

    static func listener() -> ServiceListener {
        let kv = ServiceListener(name: "kv", dependencies: ["configuration"]) { ready in
            let socket = try ListeningSocket(name: "kv", orBind: .unix(path: "/run/kv/kv.sock"))
            let connections = try socket.connections()
            // At stop: accept no more; idle connections end now, a request in flight may finish by the
            // deadline (derived from the listener's terminate budget, a little before it is cancelled).
            ready.onStop { deadline in connections.stop(deadline: deadline) }
            ready()
            try await withThrowingDiscardingTaskGroup { group in
                for try await connection in connections {
                    group.addTask {
                        defer { connection.close() }
                        while let line = try await connection.readLine(maximumBytes: 4096) {
                            try await connection.write(answer(line) + "\n")
                        }
                    }
                }
            }
        }
        return kv
    }
}
