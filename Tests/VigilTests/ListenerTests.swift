import Glibc
import InMemoryLogging
import Logging
import Synchronization
import Testing
import Vigil
import VigilPOSIX
import VigilTesting

/// Uses the proposed configuration; rejects ports below 1024 (as if it could not bind them).
struct PortListener: Listener {
    let name = "server"
    let dependencies = ["configuration"]
    let log: AsyncRecorder<String>
    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        let proposed = try reload.proposed.require(CurrentConfiguration<SampleConfiguration>.self)
        log.append("prepare \(proposed.server.port)")
        return proposed.server.port < 1024
            ? .reject(reason: "cannot bind port \(proposed.server.port) without privileges") : .accept
    }
    func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        log.append("commit \(try reload.proposed.require(CurrentConfiguration<SampleConfiguration>.self).server.port)")
    }
    func abortReload(_ reload: ReloadTransaction, context: ListenerContext) async { log.append("abort") }
}

@Suite struct ConfigurationListenerTests {
    @Test func reloadAppliesAGoodFileAndRollsBackWhenAnyListenerRejects() async throws {
        let path = temporaryDirectory() + "/sample.json"
        writeFile(path, "{ \"server\": { \"port\": 8000 } }")
        let log = AsyncRecorder<String>()
        let configuration = ConfigurationListener<SampleConfiguration>(source: .file(path, required: true))
        try await withRunningDaemon(listeners: [configuration, PortListener(log: log)]) { daemon in
            let current = { daemon.group.context.values[CurrentConfiguration<SampleConfiguration>.self]?.server.port }
            #expect(current() == 8000)

            writeFile(path, "{ \"server\": { \"port\": 9000 } }")
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadApplied(2, _) = $0 { true } else { false } }
            }
            #expect(current() == 9000)

            // Valid for the configuration listener, rejected by another: nothing changes.
            writeFile(path, "{ \"server\": { \"port\": 80 } }")
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadRejected = $0 { true } else { false } }
            }
            #expect(current() == 9000)
            #expect(daemon.group.context.generation == 2)

            // Broken file: the configuration listener rejects, naming file, line and key.
            writeFile(path, "{ \"server\": { \"port\": \"eighty\" } }")
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait {
                $0.filter { if case .reloadRejected = $0 { true } else { false } }.count == 2
            }
            guard case .reloadRejected(let rejection, 2, _) = records.last else {
                Issue.record("expected a second rejection, got \(records)")
                return
            }
            #expect(rejection.listener == "configuration")
            #expect(
                rejection.reason == "\(path):1:23: server.port: expected a whole number, found the string \"eighty\""
            )
            #expect(current() == 9000)
        }
        #expect(log.values == ["prepare 9000", "commit 9000", "prepare 80", "abort"])
    }

    /// Checked against a switch the test flips: validation that depends on more than the bytes.
    struct Switched: ValidatedConfiguration {
        static let refuse = Mutex(false)
        static let defaultConfiguration = Switched(port: 1)
        var port: Int

        func validate() throws(InvalidValue) {
            if Self.refuse.withLock({ $0 }) { throw InvalidValue(["port"], "refused by the test") }
        }
    }

    /// An unchanged file is not decoded again, but it is read and validated every time: an
    /// edit of the same length is seen, and a validation that now fails names the key.
    @Test func everyLoadReadsAndValidatesTheFile() throws {
        let path = temporaryDirectory() + "/switched.json"
        writeFile(path, "{\n  \"port\": 8000\n}")
        let listener = ConfigurationListener<Switched>(source: .file(path, required: true))
        #expect(try listener.load().port == 8000)
        #expect(try listener.load().port == 8000)
        writeFile(path, "{\n  \"port\": 9000\n}")
        #expect(try listener.load().port == 9000)
        Switched.refuse.withLock { $0 = true }
        defer { Switched.refuse.withLock { $0 = false } }
        let error = #expect(throws: ConfigurationError.self) { try listener.load() }
        #expect(error?.description == "\(path):2:11: port: refused by the test")
    }

    /// Decoded from the file and a value outside it (a secret file, say), so it says its
    /// decoding depends on more than the bytes.
    struct WithOutsideValue: ValidatedConfiguration {
        static let outside = Mutex(0)
        static let decodesFromTheFileAlone = false
        static let defaultConfiguration = WithOutsideValue(port: 1, outside: 0)
        var port: Int
        var outside: Int

        init(port: Int, outside: Int) {
            self.port = port
            self.outside = outside
        }

        enum CodingKeys: String, CodingKey { case port }
        init(from decoder: any Decoder) throws {
            port = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .port)
            outside = Self.outside.withLock { $0 }
        }

        func validate() throws(InvalidValue) {}
    }

    /// A type that reads more than the file is decoded on every load, even of unchanged bytes.
    @Test func aTypeThatReadsMoreThanTheFileIsDecodedEveryTime() throws {
        let path = temporaryDirectory() + "/outside.json"
        writeFile(path, "{ \"port\": 8000 }")
        let listener = ConfigurationListener<WithOutsideValue>(source: .file(path, required: true))
        WithOutsideValue.outside.withLock { $0 = 1 }
        #expect(try listener.load() == WithOutsideValue(port: 8000, outside: 1))
        WithOutsideValue.outside.withLock { $0 = 2 }
        #expect(try listener.load() == WithOutsideValue(port: 8000, outside: 2), "the file is the same")
    }

    /// A configuration's values keep to the stream-safe limit (its `validate()` compares them,
    /// and comparing a long run of combining marks is quadratic): the error names the place.
    @Test func aValueWithALongRunOfCombiningMarksIsRefused() throws {
        let path = temporaryDirectory() + "/sample.json"
        writeFile(path, "{\n  \"name\": \"a\(String(repeating: "\u{316}\u{301}", count: 1 << 15))\"\n}")
        let listener = ConfigurationListener<SampleConfiguration>(source: .file(path, required: true))
        let error = #expect(throws: ConfigurationError.self) { try listener.load() }
        #expect(
            error?.description
                == "\(path):2:11: not valid JSON: the string starting here has more than 30 combining marks in a row "
                + "(Unicode's stream-safe limit; no text needs more)"
        )
    }

    @Test func aMissingOptionalFileMeansTheEmbeddedDefault() throws {
        let listener = ConfigurationListener<SampleConfiguration>(
            source: .file(temporaryDirectory() + "/sample.json", required: false)
        )
        #expect(try listener.load() == .defaultConfiguration)
        let required = ConfigurationListener<SampleConfiguration>(
            source: .file("/nonexistent/sample.json", required: true)
        )
        #expect(throws: ConfigurationError.self) { try required.load() }
    }

    @Test func aBrokenFileAtStartFailsStartUpWithFileKeyAndReason() async throws {
        let path = temporaryDirectory() + "/sample.json"
        writeFile(path, "{\n  \"ratio\": 7\n}")
        let group = try ListenerGroup(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .file(path, required: true))],
            configuration: .init(logger: Logger(label: "t"), signals: SignalMap())
        )
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(
            error?.message
                == "Start-up failed: 'configuration' \(path):2:12: ratio: must be between 0 and 1 (found 7.0)."
        )
    }
}

@Suite struct PersistenceListenerTests {
    private func persistence(_ path: String) -> PersistenceListener<SampleConfiguration> {
        PersistenceListener(path: path) { _ in .zero }
    }

    @Test func checkpointsOnUserSignalAndStopAndDetectsAnUncleanShutdown() async throws {
        let path = temporaryDirectory() + "/state.json"
        let first = persistence(path)
        try await withRunningDaemon(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), first]
        ) { daemon in
            // A first start: no previous stop to know of (it said "clean" before).
            #expect(first.previousShutdownClean == nil)
            #expect(access(path + ".running", F_OK) == 0, "the marker exists while running")
            try first.store?.set(Counter(count: 1), forKey: "worker")
            daemon.group.requestUserSignal(.sigusr1)
            try await daemon.observer.kinds.wait { $0.contains(.userSignal(.sigusr1)) }
            #expect(readFile(path)?.contains("\"count\": 1") == true)
            try first.store?.set(Counter(count: 2), forKey: "worker")
        }
        #expect(readFile(path)?.contains("\"count\": 2") == true, "saved at stop")
        #expect(access(path + ".running", F_OK) != 0, "a clean stop removes the marker")

        // Simulate a crash: the marker is left behind.
        writeFile(path + ".running", "12345\n")
        let second = persistence(path)
        try await withRunningDaemon(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), second]
        ) { _ in
            #expect(second.previousShutdownClean == false)
            let restored = try second.store?.value(Counter.self, forKey: "worker")
            #expect(restored == Counter(count: 2))
        }
    }

    /// A second stop request while a part drains (an admin's `kill`, Ctrl-C twice) cuts the
    /// drain short, and the state store still takes its final checkpoint: before, the listeners
    /// after the one cut short were skipped and the values since the last checkpoint were lost.
    @Test func aSecondStopRequestStillTakesTheFinalCheckpoint() async throws {
        // On tmpfs: after the second request the checkpoint has at most a second, and its fsyncs
        // on a disk shared with a build could take longer than the test means to check.
        var template = Array("/dev/shm/vigil-state-XXXXXX".utf8CString)
        let directory = String(cString: try #require(mkdtemp(&template)))
        let path = directory + "/state.json"
        defer {
            unlink(path)
            rmdir(directory)
        }
        let persistence = persistence(path)
        let log = AsyncRecorder<String>()
        let jobs = ServiceListener(name: "jobs", dependencies: ["persistence"]) { ready in
            ready.onStop { _ in log.append("jobs.stopping") }
            ready()
            await withTaskCancellationHandler {
                try? await Task.sleep(for: .seconds(3600))  // drains forever, honours cancellation
            } onCancel: {
                log.append("jobs.cancelled")
            }
        }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), persistence, jobs]
            ) { daemon in
                try persistence.store?.set(Counter(count: 3), forKey: "worker")
                daemon.group.requestTermination(.signal(.sigterm))
                try await log.wait { $0.contains("jobs.stopping") }
                daemon.group.requestTermination(.signal(.sigterm))
            }
        }
        #expect(error?.message == "Stopped with errors: 'jobs' was cut short by a second stop request")
        #expect(log.values.contains("jobs.cancelled"))
        #expect(readFile(path)?.contains("\"count\": 3") == true, "the final checkpoint was taken")
        #expect(access(path + ".running", F_OK) != 0, "and the stop recorded as clean for the data")
    }

    /// A hook abandoned at stop that ignores cancellation still runs at the final checkpoint:
    /// what it changes after it is lost, so the marker stays and the next start says unclean.
    @Test func anAbandonedHookStillRunningKeepsTheUncleanMarker() async throws {
        var template = Array("/dev/shm/vigil-state-XXXXXX".utf8CString)
        let directory = String(cString: try #require(mkdtemp(&template)))
        let path = directory + "/state.json"
        defer {
            for name in ["state.json", "state.json.running"] { unlink(directory + "/" + name) }
            rmdir(directory)
        }
        let persistence = persistence(path)
        let log = AsyncRecorder<String>()
        let hung = RecordingListener(
            "hung",
            dependencies: ["persistence"],
            budgets: .init(terminate: .milliseconds(200)),
            log: log,
            behaviors: ["terminate": .hang]
        )
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), persistence, hung]
            ) { _ in
                try persistence.store?.set(Counter(count: 4), forKey: "worker")
            }
        }
        #expect(
            error?.message.contains("'hung' did not finish within its terminate budget") == true,
            "\(String(describing: error))"
        )
        #expect(readFile(path)?.contains("\"count\": 4") == true, "the final checkpoint was taken")
        #expect(access(path + ".running", F_OK) == 0, "the marker stays: the stop was not clean for the state")
    }

    /// A state that takes longer to parse than the start's file deadline fails the start
    /// saying so: it said "the file system did not answer … (a hung mount?)", of a file read
    /// in milliseconds (a 16 MiB state under a debug build).
    @Test func aStateTooSlowToParseIsNotBlamedOnTheFileSystem() async throws {
        let path = temporaryDirectory() + "/state.json"
        // 4 MiB of small numbers: read in milliseconds, parsed in far more than 150 ms here.
        let values = [String](repeating: "0", count: 2 << 20).joined(separator: ",")
        writeFile(path, #"{ "formatVersion": 1, "numbers": ["# + values + "] }")
        let listener = PersistenceListener<SampleConfiguration>(path: path, fileTimeout: .milliseconds(150)) { _ in
            .zero
        }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener]
            ) { _ in }
        }
        let message = error?.message ?? ""
        #expect(message.contains("were read, but parsing them took more than 150 ms"), "\(message)")
        #expect(!message.contains("did not answer"), "\(message)")
    }

    @Test func periodicCheckpointsWriteOnlyWhenSomethingChanged() async throws {
        let path = temporaryDirectory() + "/state.json"
        let clock = TestClock()
        let listener = PersistenceListener<SampleConfiguration>(path: path) { _ in .milliseconds(5) }
        try await withRunningDaemon(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener],
            clock: clock
        ) { _ in
            let store = try #require(listener.store)
            try store.set(Counter(count: 7), forKey: "worker")
            // One period: the tick's write is visible only as the store's state: poll it, bounded.
            try await clock.waitForSleep(until: .milliseconds(5))
            clock.advance(by: .milliseconds(5))
            try await poll(until: "the periodic checkpoint of count 7") { !store.hasUnsavedChanges }
            #expect(readFile(path)?.contains("\"count\": 7") == true)
            // Every write replaces the file by rename: a new modification time (the inode
            // number may be reused). Unchanged, the store is not rewritten: the file keeps its
            // inode and mtime across 40 periods, each tick run (the next is armed only after).
            let written = try #require(FileIdentity(path))
            for period in 2...41 {
                try await clock.waitForSleep(until: .milliseconds(5 * period))
                clock.advance(by: .milliseconds(5))
            }
            try await clock.waitForSleep(until: .milliseconds(5 * 42))
            #expect(FileIdentity(path) == written, "an unchanged store was rewritten")
            // The task still runs: a change is written, as a new file.
            try store.set(Counter(count: 8), forKey: "worker")
            clock.advance(by: .milliseconds(5))
            try await poll(until: "the periodic checkpoint of count 8") { !store.hasUnsavedChanges }
            #expect(readFile(path)?.contains("\"count\": 8") == true)
            #expect(FileIdentity(path) != written, "a changed store is written")
        }
    }

    /// Before: a periodic checkpoint that failed (a full disk) logged the same error at every
    /// interval, naming the file twice. Now once per run of failures, and a notice when one is
    /// written again.
    @Test func aFailingPeriodicCheckpointIsSaidOnceAndItsRecoveryToo() async throws {
        let path = temporaryDirectory() + "/state.json"
        let clock = TestClock()
        let handler = InMemoryLogHandler()
        let listener = PersistenceListener<SampleConfiguration>(path: path) { _ in .milliseconds(5) }
        // The next three writes of the temporary file fail as on a full disk.
        let full = SystemCall.inject(.write, .pathContaining(path + ".tmp"), errno: ENOSPC, after: 0, count: 3)
        defer { full.remove() }
        try await withRunningDaemon(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener],
            logger: Logger(label: "t") { _ in handler },
            clock: clock
        ) { _ in
            let store = try #require(listener.store)
            try store.set(Counter(count: 7), forKey: "worker")
            // Each tick runs before the next sleep is armed: four ticks, three of them failing.
            for period in 1...4 {
                try await clock.waitForSleep(until: .milliseconds(5 * period))
                clock.advance(by: .milliseconds(5))
            }
            try await clock.waitForSleep(until: .milliseconds(25))
            #expect(full.injected == 3)
            #expect(!store.hasUnsavedChanges, "the fourth tick wrote the file")
        }
        let said = handler.entries.filter { "\($0.message)".contains("eriodic checkpoint") }.map {
            "\($0.level) \($0.message)"
        }
        #expect(said.count == 2, "\(said)")
        #expect(
            said.first?.hasPrefix("error Periodic checkpoint failed: cannot write \(path).tmp: No space left on device")
                == true,
            "\(said)"
        )
        #expect(said.last == "notice Periodic checkpoints of \(path) are written again", "\(said)")
    }

    /// A file's inode and modification time, to tell a rewrite from an untouched file.
    private struct FileIdentity: Equatable {
        let inode: UInt64
        let modified: Int64
        let modifiedNanoseconds: Int64
        init?(_ path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            inode = UInt64(info.st_ino)
            modified = Int64(info.st_mtim.tv_sec)
            modifiedNanoseconds = Int64(info.st_mtim.tv_nsec)
        }
    }

    /// Issue 10 #13: reloads more frequent than the checkpoint interval starved checkpoints
    /// (each applied reload re-armed the timer, even when nothing changed).
    @Test func frequentReloadsDoNotStarvePeriodicCheckpoints() async throws {
        let path = temporaryDirectory() + "/state.json"
        let clock = TestClock()
        let listener = PersistenceListener<SampleConfiguration>(path: path) { _ in .milliseconds(200) }
        try await withRunningDaemon(
            listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener],
            clock: clock
        ) { daemon in
            let store = try #require(listener.store)
            try store.set(Counter(count: 7), forKey: "worker")
            try await clock.waitForSleep(until: .milliseconds(200))
            // Unchanged reloads every 80 ms (at 80 and 160 ms); the checkpoint is due at 200 ms.
            for generation in 2...3 {
                clock.advance(by: .milliseconds(80))
                daemon.group.requestReload()
                try await daemon.observer.kinds.wait {
                    $0.contains { if case .reloadApplied(generation, _) = $0 { true } else { false } }
                }
            }
            #expect(store.hasUnsavedChanges, "no checkpoint before its time")
            clock.advance(to: .milliseconds(200))
            try await poll(until: "the periodic checkpoint at 200 ms") { !store.hasUnsavedChanges }
            #expect(readFile(path)?.contains("\"count\": 7") == true)
        }
    }

    /// Issue 10 #10: a final checkpoint that fails (disk full) must fail the stop and say what
    /// was lost, not end with exit status 0.
    @Test func aFailedFinalCheckpointFailsTheStopAndSaysWhatWasLost() async throws {
        let directory = temporaryDirectory() + "/state"
        let path = directory + "/state.json"
        let listener = persistence(path)
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener]
            ) { daemon in
                let store = try #require(listener.store)
                try store.set(Counter(count: 1), forKey: "worker")
                try store.checkpoint()
                try store.set(Counter(count: 2), forKey: "worker")
                // Make every write fail: the directory becomes a file (ENOTDIR), as root too.
                #expect(rename(directory, directory + ".gone") == 0)
                writeFile(directory, "not a directory")
            }
        }
        #expect(error?.code == .stopFailed)
        let message = error?.message ?? ""
        #expect(message.contains("'persistence' the final checkpoint to \(path) failed"), "\(message)")
        #expect(message.contains("lost: worker = {\"count\":2} (on disk: {\"count\":1})"), "\(message)")
    }

    /// A final checkpoint of a state too large for the file fails the stop with what is too
    /// large and what was lost, and blames no file system: freeing space or fixing the
    /// directory would not help. The file keeps the previous checkpoint, and the marker stays.
    @Test func aFinalCheckpointOfAStateTooLargeFailsTheStopWithoutBlamingTheFileSystem() async throws {
        let path = temporaryDirectory() + "/state.json"
        let listener = persistence(path)
        let error = await #expect(throws: ListenerGroupError.self) {
            // Writing 18 MiB to find it too large takes 2.4 s in a debug build on an idle
            // machine, and more than the default 10 s terminate budget once in CI with the
            // suite's other tests and a build beside it: the budget here is not what is tested.
            try await withRunningDaemon(
                listeners: [ConfigurationListener<SampleConfiguration>(source: .embeddedDefault), listener],
                budgets: ListenerBudgets(terminate: .seconds(120))
            ) { daemon in
                let store = try #require(listener.store)
                try store.set(Counter(count: 1), forKey: "worker")
                try store.checkpoint()
                try store.set(Counter(count: 2), forKey: "worker")
                let nine = String(repeating: "x", count: 9 << 20)
                try store.set(nine, forKey: "first")
                try store.set(nine, forKey: "second")
            }
        }
        #expect(error?.code == .stopFailed)
        let message = error?.message ?? ""
        #expect(
            message.contains(
                "'persistence' the final checkpoint to \(path) failed (cannot write a checkpoint to \(path): the state "
                    + "takes more than 16 MiB (16777216 bytes) even written compactly"
            ),
            "\(message)"
        )
        #expect(message.contains("lost: worker = {\"count\":2} (on disk: {\"count\":1})"), "\(message)")
        #expect(message.hasSuffix("The file still holds the previous checkpoint."), "\(message)")
        #expect(!message.contains("file system") && !message.contains("free space"), "\(message)")
        #expect(readFile(path) == "{\n  \"formatVersion\": 1,\n  \"worker\": {\n    \"count\": 1\n  }\n}\n")
        #expect(access(path + ".running", F_OK) == 0, "the marker stays: the next start says what was lost")
    }

    /// Each cause says whom to blame: a state too large (`EFBIG`), or one whose text took longer
    /// to make than the deadline, is no fault of the file system.
    @Test func aFailedCheckpointNamesItsCause() {
        let tooLarge = FinalCheckpointError(
            path: "/s/state.json",
            cause: StateStoreError.tooLarge(path: "/s/state.json", reason: "the state takes more than 16 MiB"),
            lost: "nothing"
        )
        #expect(tooLarge.errno == EFBIG)
        #expect(
            tooLarge.description
                == "the final checkpoint to /s/state.json failed (cannot write a checkpoint to /s/state.json: the state "
                + "takes more than 16 MiB); lost: nothing. The file still holds the previous checkpoint."
        )
        let slow = FinalCheckpointError(
            path: "/s/state.json",
            cause: CheckpointTextTooSlow(path: "/s/state.json", deadline: .seconds(5)),
            lost: "nothing"
        )
        #expect(slow.errno == ETIMEDOUT)
        #expect(
            slow.description
                == "the final checkpoint to /s/state.json failed (cannot write a checkpoint to /s/state.json: making "
                + "the text of the state took more than 5 s, before anything was written (a very large state, or a "
                + "machine short of CPU; store less in it); it goes on in the background and the file keeps the "
                + "previous checkpoint until it ends); lost: nothing. The file still holds the previous checkpoint."
        )
        let disk = FinalCheckpointError(
            path: "/s/state.json",
            cause: SystemError(path: "/s/state.json.tmp", operation: "write", errno: ENOSPC),
            lost: "nothing"
        )
        #expect(disk.errno == ENOSPC)
        #expect(
            disk.description.hasSuffix(
                "The file still holds the previous checkpoint; free space on its file system before the next start."
            )
        )
        // No earlier file, and no descriptor left (helper 51): said as it is, not as a full disk.
        let descriptors = FinalCheckpointError(
            path: "/s/state.json",
            cause: SystemError(path: "/s/state.json.tmp", operation: "open", errno: EMFILE),
            lost: "count = 1 (on disk: absent)",
            previousKept: false
        )
        #expect(
            descriptors.description.hasSuffix(
                "lost: count = 1 (on disk: absent). No earlier checkpoint was on disk; raise LimitNOFILE= (the daemon "
                    + "had no descriptor left to write it) before the next start."
            ),
            "\(descriptors)"
        )
    }
}
