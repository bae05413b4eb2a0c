import Glibc
import InMemoryLogging
import Logging
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
            var template = Array("/tmp/vigil-status-XXXXXX".utf8CString)
            path = String(cString: try #require(mkdtemp(&template)))
            directory = try TrustedDirectory.open(path)
        }

        var status: RuntimeStatus? { try? RuntimeStatus.read(from: directory) }

        func remove() {
            unlink(path + "/" + RuntimeStatus.fileName)
            rmdir(path)
        }
    }

    @Test func reloadsShareOneWriteAndChangesOfStateAreWrittenAtOnce() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // A deferral no test run reaches: only the stop below may write.
        let writer = RuntimeStatusWriter(deferral: .seconds(3600))
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
        #expect(scratch.status == nil)
        unlink(planted + "/x")
        rmdir(planted)
        writer.update()
        #expect(scratch.status?.state == "running")
        #expect(handler.entries.last?.level == .notice)
        #expect(handler.entries.last?.message.description.hasSuffix("is written again") == true)
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
                  "formatVersion": 1,
                  "pid": 42,
                  "state": "running",
                  "generation": 7,
                  "lastReload": {
                    "result": "rejected",
                    "reason": "a \\"quoted\\" reason",
                    "beganMonotonicUsec": 123
                  },
                  "startedAt": 1700000000,
                  "previousShutdownClean": false
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
                "previousShutdownClean", "requests",
            ]
        )
        // Parsed members carry their positions in the file: compare the texts.
        let text = JSONWriter.write(status.document())
        #expect(JSONWriter.write(try RuntimeStatus.parse(Array(text.utf8)).document()) == text)
    }
}
