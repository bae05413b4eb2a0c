import InMemoryLogging
import Logging
import Testing
import Vigil
import VigilTesting

@Suite struct LifecycleLoggerTests {
    @Test func everyRecordBecomesOneEntryWithItsMessageID() throws {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        let logger = Logger(label: "t") { [handler] _ in handler }
        let observer = LifecycleLogger(logger: logger, version: "1.2.3")
        observer.observe(.started(generation: 1, timeToReady: .milliseconds(3)))
        observer.observe(
            .reloadRejected(
                .init(listener: "config", reason: "heartbeat.interval must be > 0"),
                generation: 1,
                duration: .microseconds(250)
            )
        )
        observer.observe(.stopping(.signal(.sigterm)))
        let entries = handler.entries
        try #require(entries.count == 3)
        #expect(entries[0].metadata["MESSAGE_ID"] == .string(LifecycleMessageID.started.rawValue))
        #expect(entries[0].metadata["VIGIL_VERSION"] == "1.2.3")
        #expect(entries[0].metadata["VIGIL_DURATION_USEC"] == "3000")
        #expect(entries[1].level == .error)
        #expect(
            "\(entries[1].message)"
                == "Reload rejected by config: heartbeat.interval must be > 0. Still running generation 1."
        )
        #expect(entries[1].metadata["MESSAGE_ID"] == .string(LifecycleMessageID.reloadRejected.rawValue))
        #expect(entries[1].metadata["VIGIL_REASON"] == "heartbeat.interval must be > 0")
        #expect(entries[2].metadata["VIGIL_REASON"] == "SIGTERM")
    }

    /// A reason that ends a sentence of its own (a question, from "did you mean") gets no full
    /// stop after it: it read `did you mean "interval"?. Still running generation 1.`
    @Test func aReasonEndingInAQuestionMarkGetsNoFullStopAfterIt() throws {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        let logger = Logger(label: "t") { [handler] _ in handler }
        let observer = LifecycleLogger(logger: logger, version: "1.2.3")
        let reason = #"unknown key "intervl"; did you mean "interval"?"#
        observer.observe(
            .reloadRejected(.init(listener: "configuration", reason: reason), generation: 1, duration: .zero)
        )
        #expect(
            handler.entries.map { "\($0.message)" }
                == [
                    #"Reload rejected by configuration: unknown key "intervl"; did you mean "interval"? Still running generation 1."#
                ]
        )
    }
}

@Suite struct DaemonTests {
    private func makeDaemon(_ listener: RecordingListener, notifier: RecordingNotifier) -> Daemon {
        let logging = DaemonLogging(
            levelControl: LogLevelControl(),
            logger: Logger(label: "t") { _ in InMemoryLogHandler() },
            destination: .syslogPrefixedStderr
        )
        var daemon = Daemon(identifier: "testd", version: "0", listeners: [listener], logging: logging)
        daemon.notifier = notifier
        daemon.signals = SignalMap()
        daemon.watchdog = Watchdog(interval: .milliseconds(100))
        return daemon
    }

    @Test func runsListenersPingsTheWatchdogAfterProbesAndStopsCleanly() async throws {
        let log = AsyncRecorder<String>()
        let notifier = RecordingNotifier()
        let daemon = makeDaemon(RecordingListener("worker", log: log), notifier: notifier)
        let running = Task { await daemon.run() }
        try await notifier.waitForReady()
        // The watchdog pings only after a probe went through the mediator and the listener.
        try await notifier.notifications.wait { $0.filter { $0 == [.watchdog] }.count >= 2 }
        #expect(log.values.contains("worker.health.done"))
        running.cancel()  // cancellation counts as a stop request
        #expect(await running.value == 0)
        #expect(log.values.contains("worker.terminate.done"))
    }

    @Test func aFailedStartReturnsOne() async throws {
        let log = AsyncRecorder<String>()
        let notifier = RecordingNotifier()
        let daemon = makeDaemon(
            RecordingListener("worker", log: log, behaviors: ["start": .fail("no")]),
            notifier: notifier
        )
        #expect(await daemon.run() == 1)
        #expect(!notifier.datagrams.contains { $0.contains("READY=1") })
    }

    /// Before: WATCHDOG_USEC=1 had the daemon ping in a loop that took a CPU and never let a
    /// SIGTERM in. Now a watchdog shorter than 10 ms fails the start, saying what to change.
    @Test func aWatchdogTooShortToKeepFailsTheStartAndSaysWhy() async throws {
        let log = AsyncRecorder<String>()
        let notifier = RecordingNotifier()
        var daemon = makeDaemon(RecordingListener("worker", log: log), notifier: notifier)
        daemon.watchdog = try #require(Watchdog(microseconds: 1))
        #expect(await daemon.run() == 1)
        #expect(!notifier.datagrams.contains { $0.contains("READY=1") })
        let status = notifier.datagrams.first { $0.hasPrefix("STATUS=") }
        #expect(
            status?.hasPrefix("STATUS=Cannot start: WatchdogSec= is 1 µs (WATCHDOG_USEC=1), shorter than the 10 ms")
                == true,
            "\(notifier.datagrams)"
        )
        #expect(!log.values.contains("worker.start"), "no listener started")
        #expect(Watchdog(interval: .milliseconds(10)).tooShort == nil)
    }
}

/// `withRunningDaemon` runs the real `Daemon`, not a copy of its wiring.
@Suite struct WithRunningDaemonTests {
    @Test func theLifecycleLoggerLogsTheRun() async throws {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        let logger = Logger(label: "t") { [handler] _ in handler }
        try await withRunningDaemon(listeners: [RecordingListener("worker", log: AsyncRecorder())], logger: logger) {
            daemon in
            _ = try await daemon.observer.kinds.wait { $0.contains { if case .started = $0 { true } else { false } } }
        }
        let ids = handler.entries.compactMap { $0.metadata["MESSAGE_ID"] }
        #expect(ids.contains(.string(LifecycleMessageID.started.rawValue)), "\(handler.entries)")
        #expect(ids.contains(.string(LifecycleMessageID.stopped.rawValue)), "\(handler.entries)")
    }

    @Test func theWatchdogPingsAfterProbesThroughTheListeners() async throws {
        let log = AsyncRecorder<String>()
        try await withRunningDaemon(
            listeners: [RecordingListener("worker", log: log)],
            watchdogInterval: .milliseconds(100)
        ) { daemon in
            try await daemon.notifier.notifications.wait("two pings") { $0.filter { $0 == [.watchdog] }.count >= 2 }
            #expect(log.values.contains("worker.health.done"))
        }
    }

    /// While the daemon starts, the mediator is busy starting and answers no probe: each
    /// watchdog round of a slow start logged "Health probe failed" with the watchdog-fault
    /// MESSAGE_ID (a helper's finding), though systemd arms the watchdog only after READY=1.
    /// Now rounds before READY=1 are skipped quietly, and pings begin after it.
    @Test func theWatchdogIsQuietWhileTheDaemonStarts() async throws {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        let logger = Logger(label: "t") { [handler] _ in handler }
        let clock = TestClock()
        let database = Gate()
        let pinged = Gate()
        let running = Task {
            try await withRunningDaemon(
                listeners: [RecordingListener("slow", log: AsyncRecorder(), behaviors: ["start": .wait(database)])],
                watchdogInterval: .seconds(1),
                logger: logger,
                clock: clock
            ) { daemon in
                // After READY=1, the next round probes and pings.
                try await clock.waitForSleep(until: .seconds(2))
                clock.advance(to: .seconds(2))
                try await daemon.notifier.notifications.wait("a ping after READY=1") { $0.contains([.watchdog]) }
                pinged.open()
            }
        }
        try await database.waitForWaiters(1)
        // Three rounds (every 0.5 s) while the start waits: each goes straight to the next.
        for round in 1...3 {
            try await clock.waitForSleep(until: .milliseconds(500 * round))
            clock.advance(to: .milliseconds(500 * round))
        }
        try await clock.waitForSleep(until: .seconds(2))
        database.open()
        await pinged.wait()
        try await running.value
        let errors = handler.entries.filter { $0.level >= .error }.map(\.message.description)
        #expect(errors.isEmpty, "\(errors)")
    }

    @Test func aFailedStartThrowsItsErrorAtOnce() async throws {
        // The start's own error, not AsyncRecorder.TimedOut from waiting 30 s for a READY=1
        // that never comes (and no wall-clock bound, which a loaded runner can exceed).
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(
                listeners: [RecordingListener("worker", log: AsyncRecorder(), behaviors: ["start": .fail("no disk")])]
            ) { _ in Issue.record("the body ran although the start failed") }
        }
        #expect(error?.code == .startFailed)
        #expect(error?.message.contains("no disk") == true, "\(String(describing: error))")
    }
}

@Suite struct DaemonLoggingTests {
    private static func logging(_ level: Logger.Level) -> (DaemonLogging, LogLevelControl) {
        let control = LogLevelControl(level)
        let logging = DaemonLogging(
            levelControl: control,
            logger: Logger(label: "t"),
            destination: .syslogPrefixedStderr
        )
        return (logging, control)
    }

    @Test func settingTheLevelChangesEveryHandlerAtOnce() {
        let (logging, control) = Self.logging(.info)
        let handler = StderrLogHandler(label: "a", format: .syslogPrefixed, levelControl: control)
        logging.level = .debug
        #expect(logging.level == .debug)
        #expect(handler.logLevel == .debug)
    }

    @Test func theLoggingListenerAppliesTheConfiguredLevelAtStart() async throws {
        let (logging, _) = Self.logging(.info)
        let values = ValueStore()
        var configuration = SampleConfiguration()
        configuration.verbose = true
        values[CurrentConfiguration<SampleConfiguration>.self] = configuration
        let listener = LoggingListener<SampleConfiguration>(logging: logging) { $0.verbose ? .debug : .notice }
        let configurationStandIn = RecordingListener("configuration", log: AsyncRecorder<RecordingListener.Call>())
        try await withRunningDaemon(listeners: [configurationStandIn, listener], values: values) { _ in
            #expect(logging.level == .debug)
        }
    }
}
