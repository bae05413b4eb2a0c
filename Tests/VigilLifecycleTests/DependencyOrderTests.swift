import Logging
import Testing
import VigilLifecycle
import VigilTesting

@Suite struct DependencyOrderTests {
    @Test func startsInDependencyOrderAndStopsInReverse() async throws {
        let log = AsyncRecorder<String>()
        let listeners = [
            RecordingListener("worker", dependencies: ["persistence"], log: log),
            RecordingListener("config", log: log),
            RecordingListener("persistence", dependencies: ["config"], log: log),
            RecordingListener("metrics", log: log),
        ]
        try await withRunningDaemon(listeners: listeners) { daemon in
            #expect(daemon.group.listeners.map(\.name) == ["config", "persistence", "worker", "metrics"])
        }
        let starts = log.values.filter { $0.hasSuffix(".start") }
        let stops = log.values.filter { $0.hasSuffix(".terminate") }
        #expect(starts == ["config.start", "persistence.start", "worker.start", "metrics.start"])
        #expect(stops == ["metrics.terminate", "worker.terminate", "persistence.terminate", "config.terminate"])
    }

    @Test func aCycleIsAnErrorThatNamesTheCycle() throws {
        let log = AsyncRecorder<String>()
        let error = #expect(throws: ListenerGroupError.self) {
            try ListenerGroup(
                listeners: [
                    RecordingListener("a", dependencies: ["b"], log: log),
                    RecordingListener("b", dependencies: ["c"], log: log),
                    RecordingListener("c", dependencies: ["a"], log: log),
                ],
                configuration: .init(logger: .init(label: "test"))
            )
        }
        #expect(error?.code == .dependencyCycle)
        #expect(error?.message.contains("a → b → c → a") == true, "\(String(describing: error))")
    }

    /// A chain of 20,000 dependencies, declared dependants first: ordered, where the recursive
    /// sort overflowed the thread's stack at 8,000 (SIGSEGV: helper 54).
    @Test func aLongChainOfDependenciesIsOrderedWithoutRecursion() throws {
        let log = AsyncRecorder<String>()
        let count = 20_000
        let listeners = (0..<count).map { index in
            RecordingListener("l\(index)", dependencies: index + 1 < count ? ["l\(index + 1)"] : [], log: log)
        }
        let group = try ListenerGroup(listeners: listeners, configuration: .init(logger: .init(label: "test")))
        #expect(group.listeners.map(\.name) == (0..<count).reversed().map { "l\($0)" })
    }

    @Test func aMissingDependencyIsAnError() throws {
        let log = AsyncRecorder<String>()
        let error = #expect(throws: ListenerGroupError.self) {
            try ListenerGroup(
                listeners: [RecordingListener("worker", dependencies: ["config"], log: log)],
                configuration: .init(logger: .init(label: "test"))
            )
        }
        #expect(error?.code == .missingDependency)
        #expect(error?.message.contains("'worker' depends on 'config'") == true)
        #expect(error?.listener == "worker")
    }

    @Test func duplicateNamesAreAnError() throws {
        let log = AsyncRecorder<String>()
        let error = #expect(throws: ListenerGroupError.self) {
            try ListenerGroup(
                listeners: [RecordingListener("x", log: log), RecordingListener("x", log: log)],
                configuration: .init(logger: .init(label: "test"))
            )
        }
        #expect(error?.code == .duplicateListener)
    }

    /// An empty name was accepted, and logs read "Failed to start:  …" (a helper's note).
    @Test func anEmptyNameIsAnError() throws {
        let log = AsyncRecorder<String>()
        let error = #expect(throws: ListenerGroupError.self) {
            try ListenerGroup(
                listeners: [RecordingListener("x", log: log), RecordingListener("", log: log)],
                configuration: .init(logger: .init(label: "test"))
            )
        }
        #expect(error?.code == .unnamedListener)
        #expect(
            error?.message
                == "Listener 2 of 2 has an empty name. Give each listener a name: logs, errors and dependencies use it."
        )
    }

    @Test func aCompositeActsAsOneListener() async throws {
        let log = AsyncRecorder<String>()
        let storage = try CompositeListener(
            name: "storage",
            members: [
                RecordingListener("index", dependencies: ["files", "config"], log: log),
                RecordingListener("files", log: log),
            ]
        )
        #expect(storage.dependencies == ["config"])
        #expect(storage.members.map(\.name) == ["files", "index"])
        try await withRunningDaemon(listeners: [storage, RecordingListener("config", log: log)]) { daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadApplied = $0 { true } else { false } }
            }
        }
        #expect(
            log.values.filter { !$0.hasSuffix(".done") } == [
                "config.start", "files.start", "index.start",
                "config.prepare", "files.prepare", "index.prepare",
                "config.commit", "files.commit", "index.commit",
                "index.terminate", "files.terminate", "config.terminate",
            ]
        )
    }

    @Test func aCompositeMemberRejectionNamesTheMember() async throws {
        let log = AsyncRecorder<String>()
        let storage = try CompositeListener(
            name: "storage",
            members: [
                RecordingListener("files", log: log),
                RecordingListener("index", log: log, decision: .reject(reason: "index is read-only")),
            ]
        )
        try await withRunningDaemon(listeners: [storage]) { daemon in
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadRejected = $0 { true } else { false } }
            }
            #expect(
                records.contains(
                    .reloadRejected(
                        .init(listener: "storage", reason: "index: index is read-only"),
                        generation: 1,
                        duration: records.compactMap {
                            if case .reloadRejected(_, _, let duration) = $0 { duration } else { nil }
                        }[0]
                    )
                )
            )
        }
        #expect(log.values.contains("files.abort") && log.values.contains("index.abort"))
    }
}
