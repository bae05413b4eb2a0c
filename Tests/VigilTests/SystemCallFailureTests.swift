import Glibc
import Logging
import Testing
import Vigil
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// Rows of README's failure-mode table through `SystemCall`'s seam, on a running daemon's
/// listeners: the call fails as a full disk or a failing drive would fail it, without root or a
/// spawned process (the end-to-end checks of the same rows stay).
@Suite struct DaemonSystemCallFailureTests {
    /// A state file below another user's link: the start fails before any directory is made
    /// behind it. PersistenceListener made the directories first and checked after (`run` checks
    /// first), so a daemon not built on DaemonCommandLine, or a state file in a subdirectory,
    /// had root make them where that user chose (a review found it).
    @Test(.enabled(if: geteuid() == 0, "planting another uid's link needs root"))
    func aStateFileBehindAnotherUsersLinkFailsTheStartBeforeAnythingIsMade() async throws {
        let base = temporaryDirectory("vigil-link")
        let victim = base + "/victim"
        mkdir(victim, 0o700)
        let shared = base + "/shared"
        mkdir(shared, 0o1777)
        chmod(shared, 0o1777)
        let link = shared + "/link"
        symlink(victim, link)
        lchown(link, 65_534, 65_534)
        let listener = PersistenceListener<SampleConfiguration>(path: link + "/sub/state.json") { _ in .zero }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener]
            ) { _ in }
        }
        #expect(error?.code == .startFailed)
        #expect(
            error?.message.contains("\(link), on its path, is a symbolic link made by uid 65534") == true,
            "\(String(describing: error))"
        )
        #expect(FileSystem.isAbsent(victim + "/sub"), "a directory was made behind the link")
    }

    /// "disk full": a failed final checkpoint fails the stop and says what was lost.
    @Test func aFullDiskAtTheFinalCheckpointFailsTheStopAndSaysWhatWasLost() async throws {
        let path = temporaryDirectory() + "/state.json"
        let listener = PersistenceListener<SampleConfiguration>(path: path) { _ in .zero }
        // The checkpoint below writes; from the next write of `state.json.tmp` on, the disk is full.
        let full = SystemCall.inject(.write, .pathContaining(path + ".tmp"), errno: ENOSPC, after: 1, count: .max)
        defer { full.remove() }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener]
            ) { _ in
                let store = try #require(listener.store)
                try store.set(Counter(count: 1), forKey: "worker")
                try store.checkpoint()
                try store.set(Counter(count: 2), forKey: "worker")
            }
        }
        #expect(full.injected == 1)
        #expect(error?.code == .stopFailed)
        let message = error?.message ?? ""
        #expect(
            message.contains(
                "'persistence' the final checkpoint to \(path) failed (cannot write \(path).tmp: No space left on device)"
            ),
            "\(message)"
        )
        #expect(message.contains("lost: worker = {\"count\":2} (on disk: {\"count\":1})"), "\(message)")
        #expect(readFile(path)?.contains("\"count\": 1") == true, "the file holds the previous checkpoint")
    }

    /// "disk full (or the state directory broken)": a periodic checkpoint that fails is logged
    /// and the daemon goes on; the next one writes.
    @Test func aPeriodicCheckpointThatFailsIsLoggedAndTheNextOneWrites() async throws {
        let path = temporaryDirectory() + "/state.json"
        let listener = PersistenceListener<SampleConfiguration>(path: path) { _ in .milliseconds(5) }
        try await withRunningDaemon(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener]
        ) { _ in
            let store = try #require(listener.store)
            let failing = SystemCall.inject(.fsync, .pathContaining(path), errno: EIO, count: 3)
            defer { failing.remove() }
            try store.set(Counter(count: 7), forKey: "worker")
            try await poll(until: "the periodic checkpoint of count 7") { !store.hasUnsavedChanges }
            #expect(failing.injected == 3, "three periodic checkpoints failed before one wrote")
            #expect(readFile(path)?.contains("\"count\": 7") == true)
        }
    }

    /// "configured file unreadable": an I/O error reading the configuration fails the start
    /// with the path and the OS's reason, never a switch to the defaults.
    @Test func anIOErrorReadingTheConfigurationFailsTheStart() async throws {
        let path = temporaryDirectory() + "/sample.json"
        writeFile(path, "{}")
        let failing = SystemCall.inject(.read, .pathContaining(path), errno: EIO)
        defer { failing.remove() }
        let group = try ListenerGroup(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .file(path, required: false))],
            configuration: .init(logger: Logger(label: "t"), signals: SignalMap())
        )
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(failing.injected == 1)
        #expect(
            error?.message == "Start-up failed: 'configuration' \(path): cannot read the file: Input/output error.",
            "\(String(describing: error?.message))"
        )
    }

    /// "configured file unreadable" at reload: rejected with the reason, the old configuration
    /// stays in force, and the next reload that reads applies.
    @Test func anIOErrorReadingTheConfigurationRejectsTheReload() async throws {
        let path = temporaryDirectory() + "/sample.json"
        writeFile(path, #"{ "name": "from the file" }"#)
        let configuration = ConfigurationListener<SampleConfiguration>(source: .file(path, required: true))
        try await withRunningDaemon(listeners: [configuration]) { daemon in
            let current = { daemon.group.context.values[CurrentConfiguration<SampleConfiguration>.self]?.name }
            writeFile(path, #"{ "name": "new" }"#)
            let failing = SystemCall.inject(.read, .pathContaining(path), errno: EIO)
            defer { failing.remove() }
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadRejected = $0 { true } else { false } }
            }
            guard case .reloadRejected(let rejection, 1, _) = records.last else {
                Issue.record("expected a rejection, got \(records)")
                return
            }
            #expect(rejection.reason == "\(path): cannot read the file: Input/output error")
            #expect(current() == "from the file", "the old configuration stays in force")
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadApplied(2, _) = $0 { true } else { false } }
            }
            #expect(current() == "new")
        }
    }
}
