import Glibc
import InMemoryLogging
import Logging
import Synchronization
import Testing
import Vigil
import VigilLifecycle
import VigilTesting

/// `status.json` as the daemon writes it (issue 12: a reload's write is deferred and shared by a
/// burst of reloads; a change of state is written at once) and its exact text.
@Suite struct RuntimeStatusWriterTests {
    /// A fresh, verified directory and a way to read the status in it.
    struct Scratch {
        let path: String
        let directory: TrustedDirectory

        init() throws {
            path = temporaryDirectory("vigil-status")
            directory = try TrustedDirectory.open(path)
        }

        var status: RuntimeStatus? { try? RuntimeStatus.read(from: directory) }

        func remove() {
            unlink(path + "/" + RuntimeStatus.fileName)
            rmdir(path)
        }
    }

    /// With a barrier's descriptor held for the exit, "stopping" is written at once too.
    @Test func reloadsShareOneWriteAndChangesOfStateAreWrittenAtOnce() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // A deferral no test run reaches: only the stop below may write.
        let writer = RuntimeStatusWriter(deferral: .seconds(3600), stoppingWaits: { false })
        writer.use(scratch.directory)
        #expect(scratch.status?.state == "starting", "written before READY=1, so reload finds the pid")

        writer.observe(.started(generation: 1, timeToReady: .milliseconds(2)))
        #expect(scratch.status?.state == "running", "a change of state is written at once")
        writer.observe(.reloadApplied(generation: 2, duration: .microseconds(80)))
        writer.observe(.reloadApplied(generation: 3, duration: .microseconds(80)))
        #expect(scratch.status?.generation == 1, "the reloads wait for one shared write")
        #expect(scratch.status?.lastReload == nil)
        #expect(writer.pendingWrite != nil)
        #expect(writer.current.generation == 3 && writer.current.state == "running")

        writer.observe(.stopping(.signal(.sigterm)))
        let stopping = try #require(scratch.status)
        #expect(stopping.state == "stopping")
        #expect(stopping.generation == 3)
        #expect(stopping.lastReload?.result == "applied")
        #expect(writer.pendingWrite == nil, "the stop's write took the due one's place")
        writer.observe(.stopped(uptime: .seconds(1)))
        #expect(scratch.status?.state == "stopped")
    }

    /// Without a barrier held (the process systemd started, nothing waiting to be sent),
    /// "stopping" waits for the deferral: a stop that ends first writes only "stopped", with
    /// everything the due write would have had.
    @Test func aQuickStopWritesOnlyStopped() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .seconds(3600), stoppingWaits: { true })
        writer.use(scratch.directory)
        writer.observe(.started(generation: 1, timeToReady: .milliseconds(2)))
        writer.observe(.reloadApplied(generation: 2, duration: .microseconds(80)))
        writer.observe(.stopping(.signal(.sigterm)))
        #expect(scratch.status?.state == "running", "not written yet")
        #expect(writer.current.state == "stopping")
        #expect(writer.pendingWrite != nil)
        writer.observe(.stopped(uptime: .seconds(1)))
        let stopped = try #require(scratch.status)
        #expect(stopped.state == "stopped")
        #expect(stopped.generation == 2)
        #expect(stopped.lastReload?.result == "applied")
        #expect(writer.pendingWrite == nil, "the stop's write took the due one's place")
    }

    /// A stop that lasts shows "stopping" once the deferral has passed.
    @Test func aLongerStopShowsStopping() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .milliseconds(1), stoppingWaits: { true })
        writer.use(scratch.directory)
        writer.observe(.started(generation: 1, timeToReady: .milliseconds(2)))
        writer.observe(.stopping(.signal(.sigterm)))
        let pending = try #require(writer.pendingWrite)
        await pending.value
        #expect(scratch.status?.state == "stopping")
        #expect(writer.pendingWrite == nil)
    }

    @Test func theDeferredWriteLandsWithoutAnotherEvent() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .milliseconds(1))
        writer.use(scratch.directory)
        let began = MonotonicClock.microseconds()
        writer.observe(
            .reloadRejected(.init(listener: "configuration", reason: "bad port"), generation: 1, duration: .zero)
        )
        let pending = try #require(writer.pendingWrite)
        await pending.value
        let status = try #require(scratch.status)
        #expect(status.lastReload?.result == "rejected")
        #expect(status.lastReload?.reason == "configuration: bad port")
        #expect((status.lastReload?.beganMonotonicUsec ?? 0) >= began)
        #expect(writer.pendingWrite == nil)
    }

    /// A rejection's reason is kept to 4 KiB: a listener's megabyte-long reason made the file
    /// larger than `reload` and `status` read (256 KiB), so both failed until the next good
    /// reload (a helper's attack, with a long key in the configuration).
    @Test func aHugeRejectionReasonIsCutSoTheFileStaysReadable() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .milliseconds(1))
        writer.use(scratch.directory)
        let reason = String(repeating: "é", count: 500_000)
        writer.observe(
            .reloadRejected(.init(listener: "configuration", reason: reason), generation: 1, duration: .zero)
        )
        await writer.pendingWrite?.value
        let kept = try #require(scratch.status?.lastReload?.reason)
        #expect(kept.hasPrefix("configuration: éé"))
        #expect(kept.hasSuffix("… (1000015 bytes)"))
        #expect(kept.utf8.count <= 4096 + "… (1000015 bytes)".utf8.count)
    }

    /// Before: a failed write was dropped without a word, and `reload` then reported no answer
    /// for a reload that was applied. Now the first failure is an error entry, and the recovery
    /// a notice.
    @Test func aWriteThatFailsIsLoggedOnceAndItsRecoveryToo() throws {
        let scratch = try Scratch()
        let planted = scratch.path + "/" + RuntimeStatus.fileName + ".tmp"
        defer {
            unlink(planted + "/x")
            rmdir(planted)
            scratch.remove()
        }
        let handler = InMemoryLogHandler()
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        writer.report(to: Logger(label: "t") { _ in handler })
        mkdir(planted, 0o700)
        TextFile.write(planted + "/x", "a directory where the temporary file goes")
        writer.use(scratch.directory)
        writer.observe(.started(generation: 1, timeToReady: .milliseconds(1)))
        writer.observe(.userSignal(.sigusr2))
        writer.update()
        let errors = handler.entries.filter { $0.level == .error }
        #expect(errors.count == 1, "\(handler.entries)")
        #expect(
            errors.first?.message.description.hasPrefix(
                "Cannot write the runtime status file \(scratch.path)/status.json: "
            ) == true
        )
        #expect(
            errors.first?.message.description.hasSuffix("(something was planted at status.json.tmp: remove it)")
                == true,
            "the advice follows the errno: \(errors)"
        )
        #expect(scratch.status == nil)
        unlink(planted + "/x")
        rmdir(planted)
        writer.update()
        #expect(scratch.status?.state == "running")
        #expect(handler.entries.last?.level == .notice)
        #expect(handler.entries.last?.message.description.hasSuffix("is written again") == true)
    }

    /// Before: a daemon's keys could make status.json longer than the 256 KiB that `status` and
    /// `reload` read (an applied reload then looked unanswered), and keys that JSON cannot hold
    /// were dropped without a word. Now the file stays readable, without the daemon's keys, and
    /// each change of that is logged once.
    @Test func keysTooLargeOrNotJSONAreLeftOutAndSaidOnce() throws {
        struct Keys: Encodable, Sendable {
            var text: String
            var ratio = 0.5
        }
        let scratch = try Scratch()
        defer { scratch.remove() }
        let handler = InMemoryLogHandler()
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        writer.report(to: Logger(label: "t") { _ in handler })
        let keys = Mutex(Keys(text: "small"))
        writer.addKeys { keys.withLock { $0 } }
        writer.use(scratch.directory)
        writer.observe(.started(generation: 1, timeToReady: .milliseconds(1)))
        #expect(scratch.status?.daemonMembers.map(\.key) == ["text", "ratio"])
        keys.withLock { $0.text = String(repeating: "x", count: RuntimeStatus.sizeLimit) }
        writer.update()
        writer.update()
        let status = try #require(scratch.status, "still readable by status and reload")
        #expect(status.state == "running")
        #expect(status.daemonMembers.isEmpty)
        keys.withLock { $0 = Keys(text: "small", ratio: .nan) }
        writer.update()
        keys.withLock { $0 = Keys(text: "small") }
        writer.update()
        #expect(scratch.status?.daemonMembers.map(\.key) == ["text", "ratio"])
        let said = handler.entries.map { "\($0.level) \($0.message)" }
        #expect(said.count == 3, "\(said)")
        #expect(
            said.first?.hasPrefix(
                "error The runtime status file \(scratch.path)/status.json leaves out daemon keys: the daemon's status keys make the file longer than the 256 KiB that 'status' and 'reload' read"
            ) == true,
            "\(said)"
        )
        #expect(said.dropFirst().first?.contains("cannot be written as JSON") == true, "\(said)")
        #expect(said.last == "notice The runtime status file \(scratch.path)/status.json holds the daemon's keys again")
    }

    @Test func aFailedStartIsWrittenAtOnce() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        writer.use(scratch.directory)
        writer.observe(.startFailed(listener: "configuration", reason: "no such file"))
        #expect(scratch.status?.state == "failed")
    }

    /// The document is built by hand (not through `Encodable`): the same keys, order and
    /// values `parse` reads, an absent optional leaving its key out.
    @Test func theDocumentsTextAndRoundTrip() throws {
        var status = RuntimeStatus(
            pid: 42,
            processStartTime: nil,
            state: "running",
            generation: 7,
            lastReload: .init(result: "rejected", reason: "a \"quoted\" reason", beganMonotonicUsec: 123),
            startedAt: 1_700_000_000,
            previousShutdownClean: false
        )
        #expect(
            JSONWriter.write(status.document()) == """
                {
                  "formatVersion": 2,
                  "pid": 42,
                  "state": "running",
                  "generation": 7,
                  "lastReload": {
                    "result": "rejected",
                    "reason": "a \\"quoted\\" reason",
                    "beganMonotonicUsec": 123
                  },
                  "startedAt": 1700000000,
                  "previousShutdownClean": false,
                  "daemon": {}
                }

                """
        )
        #expect(try RuntimeStatus.parse(Array(JSONWriter.write(status.document()).utf8)) == status)
        status.processStartTime = 99
        status.lastReload = .init(result: "applied", reason: nil, beganMonotonicUsec: .max)
        status.daemonMembers = [.init(key: "requests", value: JSONValue(.number("3")))]
        let keys: [String]
        if case .object(let members) = status.document().kind { keys = members.map(\.key) } else { keys = [] }
        #expect(
            keys == [
                "formatVersion", "pid", "processStartTime", "state", "generation", "lastReload", "startedAt",
                "previousShutdownClean", "daemon",
            ]
        )
        // Parsed members carry their positions in the file: compare the texts.
        let text = JSONWriter.write(status.document())
        #expect(JSONWriter.write(try RuntimeStatus.parse(Array(text.utf8)).document()) == text)
    }

    /// Issue 23 item 4: a daemon's keys live under `daemon`; before, they shared the top level
    /// with the library's and one named like a library key was dropped without a word.
    @Test func aDaemonsKeysCannotCollideWithTheLibrarys() throws {
        struct Colliding: Encodable, Sendable {
            var pid = "mine"
            var state = 7
            var requests = 3
        }
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        writer.addKeys { Colliding() }
        writer.use(scratch.directory)
        let status = try #require(scratch.status)
        #expect(status.pid == getpid() && status.state == "starting")
        #expect(status.daemonMembers.map(\.key) == ["pid", "state", "requests"], "all of the daemon's keys kept")
        let text = try #require(TextFile.read(scratch.path + "/status.json"))
        let root = try JSONParser.parse(Array(text.utf8))
        guard case .object(let members) = root.kind else { throw CancellationError() }
        #expect(members.filter { $0.key == "pid" }.count == 1)
        #expect(members.last?.key == "daemon")
        // `status --json`: the keys of version 1 at the top level (scripts keep working), the
        // colliding ones only under `daemon`.
        let json = try JSONParser.parse(Array(try status.json().utf8))
        guard case .object(let printed) = json.kind else { throw CancellationError() }
        #expect(
            printed.map(\.key) == [
                "formatVersion", "pid", "processStartTime", "state", "generation", "startedAt", "daemon", "requests",
                "uptimeSeconds",
            ]
        )
    }

    /// Issue 21 item 4: before, the file said `previousShutdownClean: true` while starting and
    /// for a daemon that keeps no record; now the key is absent until someone knows.
    @Test func anUnknownPreviousShutdownIsNotReportedClean() throws {
        final class Store: Listener, ShutdownHistory {
            let name = "store"
            let marker: ShutdownMarker
            init(_ path: String) { marker = ShutdownMarker(path: path) }
            var previousShutdownClean: Bool? { marker.previousShutdownClean }
            func start(context: ListenerContext) async throws {}
        }
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        writer.use(scratch.directory)
        #expect(try #require(scratch.status).previousShutdownClean == nil, "no listener keeps a history")
        #expect(TextFile.read(scratch.path + "/status.json")?.contains("previousShutdownClean") == false)

        let markerPath = scratch.path + "/store.running"
        defer { unlink(markerPath) }
        let store = Store(markerPath)
        writer.track([store])
        writer.update()
        #expect(try #require(scratch.status).previousShutdownClean == nil, "not read yet")
        TextFile.write(markerPath, "12345\n")  // left by a run that was killed
        try store.marker.begin()
        writer.update()
        #expect(try #require(scratch.status).previousShutdownClean == false, "the author's marker reports it")
    }

    /// Issue 23: a `ServiceListener` handed a `ShutdownHistory` reports it, as a listener that
    /// conforms does (before, a part with its own database needed a second listener for it), and
    /// the daemon counts as keeping state.
    @Test func aServiceListenersShutdownHistoryIsReported() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        writer.use(scratch.directory)
        let markerPath = scratch.path + "/jobs.running"
        defer { unlink(markerPath) }
        let marker = ShutdownMarker(path: markerPath)
        let part = ServiceListener(name: "jobs", shutdownHistory: marker) { ready in ready() }
        let plain = ServiceListener(name: "plain") { ready in ready() }
        #expect(plain.shutdownHistory == nil)
        writer.track([plain, part])
        TextFile.write(markerPath, "4242\n")  // left by a run that was killed
        try marker.begin()
        writer.update()
        #expect(try #require(scratch.status).previousShutdownClean == false, "the part's marker reports it")
        try marker.end()  // this run stopped cleanly: the next one finds no marker
        let clean = ShutdownMarker(path: markerPath)
        try clean.begin()
        writer.track([ServiceListener(name: "jobs", shutdownHistory: clean) { ready in ready() }])
        writer.update()
        #expect(try #require(scratch.status).previousShutdownClean == true)
    }

    /// Issue 21 item 5: before, uptime was wall-clock now minus `startedAt`, so stepping the
    /// clock back an hour gave `uptime: -3598 s`. Now it counts on `CLOCK_BOOTTIME` from the
    /// process's start time.
    @Test func uptimeDoesNotFollowTheWallClock() {
        let started = try? #require(ProcessStartTime.current)
        var status = RuntimeStatus(
            pid: getpid(),
            processStartTime: started,
            state: "running",
            generation: 1,
            lastReload: nil,
            startedAt: Int64(time(nil)) + 3600,  // the wall clock stepped back an hour since
            previousShutdownClean: nil
        )
        #expect(status.uptimeSeconds >= 0 && status.uptimeSeconds < 3600, "\(status.uptimeSeconds)")
        #expect(status.uptimeSeconds(bootTimeTicks: (ticks: (started ?? 0) + 250, perSecond: 100)) == 2)
        #expect(status.uptimeSeconds(bootTimeTicks: (ticks: 0, perSecond: 100)) == 0, "never negative")
        status.processStartTime = nil
        #expect(status.uptimeSeconds == 0, "without a start time, the wall clock, never below 0")
    }

    /// Issue 21 item 3 and issue 23 item 5, as `run` does it: the runtime directory and a
    /// daemon's state directory are made and locked before the status is written; a stateless
    /// daemon gets no state directory (its unit may have none, under ProtectSystem=strict).
    @Test func runsDirectoriesAreMadeAndLockedBeforeTheStatusIsWritten() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let base = scratch.path
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
        let first = HeldLocks()
        writer.use(try first.takeDirectories(runtime: .init(path: base + "/run"), state: nil))
        #expect(!FileSystem.exists(base + "/state"), "a stateless daemon made a state directory")
        #expect(FileSystem.exists(base + "/run/status.json"))

        let stateful = HeldLocks()
        let other = RuntimeStatusWriter(deferral: .seconds(3600))
        let refused = #expect(throws: SystemError.self) {
            other.use(try stateful.takeDirectories(runtime: .init(path: base + "/run"), state: base + "/state"))
        }
        #expect(refused?.detail?.hasPrefix("pid \(getpid()) holds it") == true)
        #expect(!FileSystem.exists(base + "/state"), "the refused one went on to the state directory")
        other.use(try stateful.takeDirectories(runtime: .init(path: base + "/run2"), state: base + "/state"))
        #expect(FileSystem.exists(base + "/state/instance.lock"))
        for path in ["/run/instance.lock", "/run2/status.json", "/run2/instance.lock", "/state/instance.lock"] {
            unlink(base + path)
        }
        for path in ["/run", "/run2", "/state"] { rmdir(base + path) }
    }

    /// A closure whose keys JSON cannot hold is an error to the test, not keys silently left out.
    @Test func daemonKeysThatJSONCannotHoldAreAnError() throws {
        struct Ratio: Codable, Sendable { var value: Double }
        let status = RuntimeStatusWriter()
        status.addKeys { JobKeys(runs: 2, lastResult: "done") }
        #expect(try status.daemonKeys(as: JobKeys.self).runs == 2)
        status.addKeys { Ratio(value: .nan) }
        #expect(throws: (any Error).self) { try status.daemonKeys(as: JobKeys.self) }
        // Keys the file would leave out for their length are an error too.
        let long = RuntimeStatusWriter()
        long.addKeys { JobKeys(runs: 1, lastResult: String(repeating: "x", count: 300 << 10)) }
        #expect {
            try long.daemonKeys(as: JobKeys.self)
        } throws: { "\($0)".contains("longer than the 256 KiB") }
    }

    /// Several `addKeys` closures merge; a key two of them hold is the first one's.
    @Test func severalClosuresMergeAndTheFirstKeepsAKeyTheyShare() throws {
        struct First: Codable, Sendable { var runs: Int }
        struct Second: Codable, Sendable { var runs: Int; var lastResult: String }
        struct Third: Codable, Sendable { var lastResult: String; var extra: Int }
        struct All: Codable, Sendable { var runs: Int; var lastResult: String; var extra: Int }
        let status = RuntimeStatusWriter()
        status.addKeys { First?.none }  // adds nothing this time
        status.addKeys { First(runs: 1) }
        status.addKeys { Second(runs: 2, lastResult: "second") }
        status.addKeys { Third(lastResult: "third", extra: 3) }
        let all = try status.daemonKeys(as: All.self)
        #expect(all.runs == 1)
        #expect(all.lastResult == "second")
        #expect(all.extra == 3)
    }
}
