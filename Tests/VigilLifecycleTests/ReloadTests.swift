import Logging
import Testing
import VigilLifecycle
import VigilTesting

private func isApplied(_ record: LifecycleRecord.Kind) -> Bool {
    if case .reloadApplied = record { true } else { false }
}

private func isRejected(_ record: LifecycleRecord.Kind) -> Bool {
    if case .reloadRejected = record { true } else { false }
}

/// A listener that proposes a value during prepare and one that reads it, to show values flow
/// through the transaction, not globals.
private enum ProposedSetting: ValueKey { typealias Value = String }

private struct Proposer: Listener {
    let name = "config"
    func start(context: ListenerContext) async throws { context.values[ProposedSetting.self] = "v1" }
    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        reload.proposed[ProposedSetting.self] = "v\(reload.generation)"
        return .accept
    }
    func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        context.values[ProposedSetting.self] = try reload.proposed.require(ProposedSetting.self)
    }
}

private struct Reader: Listener {
    let name = "reader"
    let dependencies = ["config"]
    let seen: AsyncRecorder<String>
    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        seen.append(
            "proposed \(reload.proposed[ProposedSetting.self] ?? "nil"), current \(context.values[ProposedSetting.self] ?? "nil")"
        )
        return .accept
    }
}

@Suite struct ReloadTests {
    @Test func allPrepareThenAllCommit() async throws {
        let log = AsyncRecorder<String>()
        let seen = AsyncRecorder<String>()
        try await withRunningDaemon(listeners: [Proposer(), Reader(seen: seen), RecordingListener("worker", log: log)])
        {
            daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isApplied) }
            #expect(daemon.group.context.generation == 2)
            #expect(daemon.group.context.values[ProposedSetting.self] == "v2")
            let datagrams = daemon.notifier.datagrams
            #expect(datagrams[1].hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
            #expect(datagrams[2] == "STATUS=Running (generation 2); reload applied\nREADY=1")
        }
        #expect(seen.values == ["proposed v2, current v1"])
        #expect(
            log.values.filter { !$0.hasSuffix(".done") } == [
                "worker.start", "worker.prepare", "worker.commit", "worker.terminate",
            ]
        )
    }

    @Test func oneRejectionAbortsEveryPreparedListenerAndKeepsTheOldGeneration() async throws {
        let log = AsyncRecorder<String>()
        let listeners = [
            RecordingListener("config", log: log),
            RecordingListener(
                "cache",
                dependencies: ["config"],
                log: log,
                decision: .reject(reason: "cache.size must be > 0")
            ),
            RecordingListener("worker", dependencies: ["cache"], log: log),
        ]
        try await withRunningDaemon(listeners: listeners) { daemon in
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait { $0.contains(where: isRejected) }
            guard case .reloadRejected(let rejection, let generation, _) = records.first(where: isRejected) else {
                Issue.record("no rejection")
                return
            }
            #expect(rejection == .init(listener: "cache", reason: "cache.size must be > 0"))
            #expect(generation == 1)
            #expect(daemon.group.context.generation == 1)
            #expect(
                daemon.notifier.datagrams.last
                    == "STATUS=Running (generation 1); reload rejected: cache: cache.size must be > 0\nREADY=1"
            )
        }
        let reload = log.values.filter {
            !$0.hasSuffix(".done") && !$0.hasSuffix(".start") && !$0.hasSuffix(".terminate")
        }
        #expect(reload == ["config.prepare", "cache.prepare", "cache.abort", "config.abort"])
    }

    @Test func aThrowingOrSlowPrepareCountsAsARejection() async throws {
        let log = AsyncRecorder<String>()
        let listeners = [
            RecordingListener("config", log: log, behaviors: ["prepare": .fail("file unreadable")]),
            RecordingListener(
                "slow",
                budgets: .init(reload: .milliseconds(50)),
                log: log,
                behaviors: ["prepare": .hang]
            ),
        ]
        try await withRunningDaemon(listeners: listeners) { daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isRejected) }
            listeners[0].setBehavior(.succeed, for: "prepare")
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait { $0.filter(isRejected).count == 2 }
            let reasons = records.compactMap { record -> String? in
                if case .reloadRejected(let rejection, _, _) = record { "\(rejection)" } else { nil }
            }
            #expect(reasons == ["config: file unreadable", "slow: did not finish within its reload budget of 50 ms"])
        }
    }

    @Test func requestsDuringAReloadCollapseIntoExactlyOneFollowUp() async throws {
        let log = AsyncRecorder<String>()
        let gate = Gate()
        let listener = RecordingListener("config", log: log, behaviors: ["prepare": .wait(gate)])
        try await withRunningDaemon(listeners: [listener]) { daemon in
            daemon.group.requestReload()
            try await log.wait { $0.contains("config.prepare") }
            for _ in 0..<1000 { daemon.group.requestReload() }
            gate.open()
            try await daemon.observer.kinds.wait { $0.filter(isApplied).count == 2 }
            // A user signal is handled after any pending reload: once it is recorded, a third
            // reload would have been too.
            daemon.group.requestUserSignal()
            try await daemon.observer.kinds.wait { $0.contains(.userSignal(.sigusr1)) }
            #expect(daemon.observer.kinds.values.filter(isApplied).count == 2)
            #expect(daemon.group.context.generation == 3)
        }
        // Never overlapping: each prepare finished before the next began.
        let phases = log.values.filter { $0.hasPrefix("config.prepare") }
        #expect(phases == ["config.prepare", "config.prepare.done", "config.prepare", "config.prepare.done"])
    }

    @Test func terminateDuringAReloadLetsTheReloadFinishFirst() async throws {
        let log = AsyncRecorder<String>()
        let gate = Gate()
        let listener = RecordingListener("config", log: log, behaviors: ["prepare": .wait(gate)])
        let observer = try await withRunningDaemon(listeners: [listener]) { daemon in
            daemon.group.requestReload()
            try await log.wait { $0.contains("config.prepare") }
            daemon.group.requestTermination(.requested("test"))
            daemon.group.requestReload()  // dropped: the daemon is stopping
            gate.open()
            return daemon.observer
        }
        #expect(
            log.values == [
                "config.start", "config.start.done", "config.prepare", "config.prepare.done",
                "config.commit", "config.commit.done", "config.terminate", "config.terminate.done",
            ]
        )
        let kinds = observer.kinds.values.map { record -> String in
            switch record {
            case .started: "started"
            case .reloadApplied: "applied"
            case .stopping: "stopping"
            case .stopped: "stopped"
            default: "other"
            }
        }
        #expect(kinds == ["started", "applied", "stopping", "stopped"])
    }
}

/// Asks for another reload from every reload, until told to stop: a daemon whose reload finds
/// more to reload each time (or a flood of SIGHUPs).
private struct EndlessReloader: Listener {
    let name = "endless"
    let going: AsyncRecorder<Bool>
    let reloads: AsyncRecorder<Int>
    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        reloads.append(reload.generation)
        if going.values.isEmpty { context.requestReload() }
        return .accept
    }
}

@Suite struct ReloadFairnessTests {
    @Test func aReloadRequestedByEveryReloadLetsUserSignalsAndMemoryPressureThrough() async throws {
        let stop = AsyncRecorder<Bool>()
        let reloads = AsyncRecorder<Int>()
        let log = AsyncRecorder<String>()
        try await withRunningDaemon(
            listeners: [EndlessReloader(going: stop, reloads: reloads), RecordingListener("worker", log: log)]
        ) { daemon in
            daemon.group.requestReload()
            // Reloads follow one another: each one asked for the next.
            _ = try await reloads.wait("three reloads") { $0.count >= 3 }
            daemon.group.context.requestUserSignal(.sigusr1)
            daemon.group.requestMemoryPressure()
            // Before, reloads came first for as long as one was pending: neither was ever handled.
            _ = try await daemon.observer.kinds.wait("the user signal and the memory pressure") { kinds in
                kinds.contains { if case .userSignal(.sigusr1) = $0 { true } else { false } }
                    && kinds.contains { if case .memoryPressure = $0 { true } else { false } }
            }
            let before = reloads.values.count
            // And the reloads go on after them.
            _ = try await reloads.wait("a reload after them") { $0.count > before }
            stop.append(true)
        }
        #expect(log.values.contains("worker.userSignal"))
        #expect(log.values.contains("worker.memoryPressure"))
    }
}
