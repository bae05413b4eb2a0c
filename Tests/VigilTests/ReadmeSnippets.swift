// swift-format-ignore-file
// (The snippet stays exactly as the article shows it.)
// TestingADaemon.md's example, verbatim: a test, so it runs as well as compiles
// (ReadmeSnippetTests checks that the article's block appears here line for line). The snippets
// that begin with `import` (README.md, the other DocC articles) are whole programs:
// Tests/Snippets/run.sh builds each one alone as the main.swift of a package of its own.
import Synchronization
import Testing
import Vigil
import VigilTesting

@Test func aRejectedReloadKeepsTheOldGeneration() async throws {
    let log = AsyncRecorder<RecordingListener.Call>()
    let worker = RecordingListener("worker", log: log, decision: .reject(reason: "not now"))
    try await withRunningDaemon(listeners: [worker]) { daemon in
        daemon.context.requestReload()
        try await daemon.observer.records.wait("the rejection") {
            $0.contains { $0.event == .reloadRejected }
        }
        #expect(daemon.context.generation == 1)
        #expect(log.values.contains("worker.prepare"))
    }
}

// TestingADaemon.md: a daemon's own PeriodicTask on the test's clock.
/// A daemon's own listener: `work` every 10 s from start, stopped at terminate.
final class Ticker: Listener {
    let name = "ticker"
    private let work: @Sendable () async -> Void
    private let task = PeriodicTask()

    init(work: @escaping @Sendable () async -> Void) { self.work = work }

    func start(context: ListenerContext) async throws {
        task.schedule(every: .seconds(10), work)
    }

    func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        await task.stop()
    }
}

@Test func theTickerWorksWhenTheTestAdvancesTheClock() async throws {
    let clock = TestClock()
    let ticks = AsyncRecorder<String>()
    try await withRunningDaemon(listeners: [Ticker { ticks.append("tick") }], clock: clock) { _ in
        try await clock.waitForSleep(until: .seconds(10))  // the first tick is due at 10 s
        #expect(ticks.values.isEmpty)
        clock.advance(by: .seconds(10))
        try await ticks.wait { $0 == ["tick"] }
        try await clock.waitForSleep(until: .seconds(20))
        clock.advance(by: .seconds(10))
        try await ticks.wait { $0 == ["tick", "tick"] }
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

// TestingADaemon.md: a listener's keys in status.json, read back from a writer of the test's own.
struct JobKeys: Codable, Sendable, Equatable { var runs: Int, lastResult: String }

/// Counts the jobs `SIGUSR1` runs into status.json's `daemon` object.
final class Jobs: Listener {
    let name = "jobs"
    private let status: RuntimeStatusWriter
    private let keys = Mutex(JobKeys(runs: 0, lastResult: "none yet"))

    init(status: RuntimeStatusWriter) {  // the daemon: Jobs(status: options.status)
        self.status = status
        status.addKeys { [weak self] in self?.keys.withLock { $0 } }  // weak: the writer keeps this closure
    }

    func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        keys.withLock { $0 = JobKeys(runs: $0.runs + 1, lastResult: "done") }
        status.update()  // rewrites the daemon's file now
    }
}

@Test func aJobIsCountedInTheStatus() async throws {
    let status = RuntimeStatusWriter()
    try await withRunningDaemon(listeners: [Jobs(status: status)]) { daemon in
        daemon.context.requestUserSignal(.sigusr1)
        try await daemon.observer.records.wait { $0.contains { $0.event == .userSignal } }
        #expect(try status.daemonKeys(as: JobKeys.self) == JobKeys(runs: 1, lastResult: "done"))
    }
}
