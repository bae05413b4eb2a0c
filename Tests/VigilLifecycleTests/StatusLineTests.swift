import Synchronization
import Testing
import VigilLifecycle
import VigilTesting

private func isApplied(_ record: LifecycleRecord.Kind) -> Bool {
    if case .reloadApplied = record { true } else { false }
}

/// A listener that reports its own status while it starts, as a daemon's part does.
private struct Counter: Listener {
    let name = "counter"
    func start(context: ListenerContext) async throws { context.reportStatus("3 files") }
}

/// A listener that refuses reloads while `refusing` is on.
private struct Refuser: Listener {
    final class Switch: Sendable { let on = Mutex(true) }
    let name = "refuser"
    var refusing = Switch()
    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        refusing.on.withLock { $0 } ? .reject(reason: "not today") : .accept
    }
}

private func isRejected(_ record: LifecycleRecord.Kind) -> Bool {
    if case .reloadRejected = record { true } else { false }
}

/// `STATUS=` is the lifecycle's phase, then the daemon's own line: neither erases the other.
@Suite struct StatusLineTests {
    @Test func theDaemonsLineFollowsEveryPhaseButTheErrors() async throws {
        let datagrams = try await withRunningDaemon(listeners: [Counter()]) { daemon in
            let context = daemon.group.context
            context.reportStatus("4 files")
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isApplied) }
            context.reportFatalFault("disk gone", listener: "counter")
            context.reportStatus("5 files")
            return daemon.notifier
        }.datagrams
        #expect(datagrams.count == 8, "\(datagrams)")
        guard datagrams.count == 8 else { return }
        #expect(datagrams[0] == "STATUS=3 files", "before start-up ends, the line is the daemon's alone")
        #expect(datagrams[1] == "STATUS=Running (generation 1); 3 files\nREADY=1")
        #expect(datagrams[2] == "STATUS=Running (generation 1); 4 files")
        #expect(datagrams[3].hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        #expect(datagrams[3].hasSuffix("\nSTATUS=Reloading…; 4 files"))
        #expect(datagrams[4] == "STATUS=Running (generation 2); reload applied; 4 files\nREADY=1")
        #expect(
            datagrams[5] == "STATUS=Fatal fault in counter: disk gone\nWATCHDOG=trigger",
            "an error is the whole line"
        )
        #expect(datagrams[6] == "STATUS=Fatal fault in counter: disk gone; 5 files", "and stays before the next")
        #expect(datagrams[7] == "STOPPING=1\nSTATUS=Stopping (test finished)…; 5 files")
    }

    @Test func withoutALineOfItsOwnTheDaemonShowsThePhaseAlone() async throws {
        let datagrams = try await withRunningDaemon(listeners: [RecordingListener("worker", log: AsyncRecorder())]) {
            daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isApplied) }
            return daemon.notifier
        }.datagrams
        #expect(datagrams.first == "STATUS=Running (generation 1)\nREADY=1")
        #expect(datagrams.contains("STATUS=Running (generation 2); reload applied\nREADY=1"))
        #expect(datagrams.last == "STOPPING=1\nSTATUS=Stopping (test finished)…")
    }

    @Test func aHugeLineIsCutToSystemdsLimitOnceAndStaysCut() async throws {
        // 12 MiB of two-byte letters and line breaks: kept whole, every later send would copy it.
        let huge = String(repeating: "é\n", count: 4_000_000)
        let kept = ListenerContext.keptForStatus(huge)
        #expect(kept.utf8.count == 1025 && huge.hasPrefix(kept), "whole characters to one byte past the limit")
        let datagrams = try await withRunningDaemon(listeners: [Counter()]) { daemon in
            daemon.group.context.reportStatus(huge)
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isApplied) }
            return daemon.notifier
        }.datagrams
        let lines = datagrams.flatMap { $0.split(separator: "\n") }.filter { $0.hasPrefix("STATUS=") }
        let own = lines.filter { $0.contains("é") }
        #expect(own.count == 4, "the report, the reload's two lines and the stop's: \(lines.map(\.utf8.count))")
        for line in own {
            #expect(line.utf8.count <= "STATUS=".utf8.count + 1024, "cut to 1 KiB: \(line.utf8.count) bytes")
            #expect(line.hasSuffix("…"), "the cut is shown")
            let report = line.drop { $0 != "é" }
            #expect(report.hasPrefix("é é é") && !report.dropLast().contains("…"), "line breaks became spaces")
        }
        #expect(own.first?.hasPrefix("STATUS=Running (generation 1); é é") == true)
        #expect(own.last?.hasPrefix("STATUS=Stopping (test finished)…; é é") == true)
    }

    @Test func aRejectionStaysInTheLineUntilTheNextReload() async throws {
        let datagrams = try await withRunningDaemon(listeners: [Counter(), Refuser()]) { daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isRejected) }
            daemon.group.context.reportStatus("4 files")
            return daemon.notifier
        }.datagrams
        #expect(
            datagrams.contains("STATUS=Running (generation 1); reload rejected: refuser: not today; 3 files\nREADY=1"),
            "\(datagrams)"
        )
        #expect(
            datagrams.contains("STATUS=Running (generation 1); reload rejected: refuser: not today; 4 files"),
            "the daemon's next report keeps it: \(datagrams)"
        )
        #expect(datagrams.last == "STOPPING=1\nSTATUS=Stopping (test finished)…; 4 files")
    }

    @Test func theNextReloadClearsTheRejection() async throws {
        let refuser = Refuser()
        let datagrams = try await withRunningDaemon(listeners: [Counter(), refuser]) { daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isRejected) }
            refuser.refusing.on.withLock { $0 = false }
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait { $0.contains(where: isApplied) }
            daemon.group.context.reportStatus("4 files")
            return daemon.notifier
        }.datagrams
        #expect(datagrams.contains("STATUS=Running (generation 2); reload applied; 3 files\nREADY=1"), "\(datagrams)")
        #expect(datagrams.contains("STATUS=Running (generation 2); 4 files"), "\(datagrams)")
    }

    /// What is kept is counted as the wire counts it: a line break is one space there, `"\r\n"`
    /// and U+2028 (2 and 3 bytes) too, so a report of them still fills the line to the limit and
    /// ends in the ellipsis, as the whole text would.
    @Test(arguments: ["x\r\n", "\u{2028}", "é\n", "\u{1B}", "\t"])
    func whatIsKeptFillsTheLineAsTheWholeReportWould(piece: String) async throws {
        let report = String(repeating: piece, count: 3000)
        let datagrams = try await withRunningDaemon(listeners: [Counter()]) { daemon in
            daemon.group.context.reportStatus(report)
            return daemon.notifier
        }.datagrams
        let line = try #require(
            datagrams.first { $0.hasPrefix("STATUS=Running (generation 1); ") && !$0.contains("READY=1") }
        )
        #expect(line.hasSuffix("…"), "cut, and the cut shown")
        #expect(line.utf8.count >= "STATUS=".utf8.count + 1020, "filled to the limit: \(line.utf8.count) bytes")
    }
}
