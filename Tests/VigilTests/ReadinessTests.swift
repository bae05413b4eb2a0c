import InMemoryLogging
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import Vigil
import VigilTesting

/// The daemon's log, in memory (swift-log's own test handler), at every level.
private func memoryLog() -> InMemoryLogHandler {
    var handler = InMemoryLogHandler()
    handler.logLevel = .trace
    return handler
}

extension InMemoryLogHandler.Entry {
    fileprivate var text: String { "\(message)" }
    fileprivate var messageID: String? { metadata["MESSAGE_ID"].map { "\($0)" } }
}

private func makeDaemon(
    _ listeners: [any Listener],
    notifier: RecordingNotifier,
    log: InMemoryLogHandler,
    watchdog: Watchdog?,
    clock: TestClock? = nil
) -> Daemon {
    let logging = DaemonLogging(
        levelControl: LogLevelControl(),
        logger: Logger(label: "t") { _ in log },
        destination: .syslogPrefixedStderr
    )
    var daemon = Daemon(identifier: "testd", version: "0", listeners: listeners, logging: logging)
    daemon.notifier = notifier
    daemon.signals = SignalMap()
    daemon.watchdog = watchdog
    if let clock { daemon.clock = clock.loopClock }
    return daemon
}

private struct AddressInUse: Error, CustomStringConvertible {
    var description: String { "cannot bind 127.0.0.1:8080: address already in use" }
}

/// A swift-service-lifecycle service that drains one in-flight request on graceful shutdown,
/// and notes whether "Stopped" was already logged when it finished draining.
private struct DrainingService: Service {
    let steps: AsyncRecorder<String>
    let log: InMemoryLogHandler
    let inFlight: Gate
    func run() async throws {
        steps.append("running")
        try? await gracefulShutdown()
        steps.append("draining")
        await inFlight.wait()
        let stopped = log.entries.contains { $0.messageID == LifecycleMessageID.stopped.rawValue }
        steps.append(stopped ? "drained after Stopped was logged" : "drained")
    }
}

@Suite struct ReadinessTests {
    @Test func aPartThatFailsBeforeItIsReadyIsAStartFailureWithItsReason() async throws {
        let log = memoryLog()
        let notifier = RecordingNotifier()
        let http = ServiceListener(name: "http", run: { _ in throw AddressInUse() })
        let daemon = makeDaemon([http], notifier: notifier, log: log, watchdog: nil)
        #expect(await daemon.run() == 1)
        #expect(!notifier.datagrams.contains { $0.contains("READY=1") })
        #expect(
            notifier.datagrams.contains(
                "STATUS=Failed to start: http cannot bind 127.0.0.1:8080: address already in use"
            )
        )
        let failed = log.entries.filter { $0.messageID == LifecycleMessageID.startFailed.rawValue }
        #expect(failed.count == 1)
        #expect(failed.first?.text.contains("address already in use") == true)
    }

    /// Before: every probe during the stop was answered "unhealthy" and logged as a withheld
    /// watchdog ping with the watchdog-fault MESSAGE_ID.
    @Test func theWatchdogIsQuietWhileTheDaemonDrains() async throws {
        let log = memoryLog()
        let notifier = RecordingNotifier()
        let contexts = AsyncRecorder<ListenerContext>()
        let clock = TestClock()
        let draining = ServiceListener(
            name: "http",
            budgets: .init(health: .milliseconds(20)),
            run: { ready in
                contexts.append(ready.context)
                ready()
                try? await gracefulShutdown()
                // A drain of six watchdog ping intervals (the scenario, on the test clock).
                try? await ready.context.clock.sleep(for: .milliseconds(300))
            }
        )
        let daemon = makeDaemon(
            [draining],
            notifier: notifier,
            log: log,
            watchdog: Watchdog(interval: .milliseconds(100)),
            clock: clock
        )
        let running = Task { await daemon.run() }
        try await notifier.waitForReady()
        // The first round (50 ms): a ping; the next round is armed for 100 ms.
        try await clock.waitForSleep(until: .milliseconds(50))
        clock.advance(to: .milliseconds(50))
        try await notifier.notifications.wait { $0.contains([.watchdog]) }
        try await clock.waitForSleep(until: .milliseconds(100))
        // A stop request as SIGTERM makes it (cancelling run() would end the watchdog's task too).
        try await contexts.wait { !$0.isEmpty }[0].requestTermination("test")
        try await clock.waitForSleep(until: .milliseconds(350))  // the part drains
        // Rounds while the part drains: the watchdog's wait ended before the stop did, so its
        // round runs before run() returns (run() waits for the watchdog's task).
        for round in 2...6 { clock.advance(to: .milliseconds(50 * round)) }
        clock.advance(to: .milliseconds(350))
        #expect(await running.value == 0)
        let values = log.entries
        #expect(!values.contains { $0.messageID == LifecycleMessageID.watchdogFault.rawValue })
        #expect(values.filter { $0.level >= .warning }.isEmpty, "\(values.filter { $0.level >= .warning })")
        // And no ping after STOPPING=1: a ping would arm systemd's watchdog again.
        let all = notifier.notifications.values
        let stopping = try #require(all.firstIndex { $0.contains(.stopping) })
        #expect(!all[stopping...].contains([.watchdog]))
    }

    /// A stop that arrives while a slow reload runs: the mediator cannot answer probes until the
    /// reload ends and it sends STOPPING=1, but the stop is already under way; no false alarm.
    @Test func theWatchdogIsQuietBetweenAStopRequestAndStoppingOne() async throws {
        let log = memoryLog()
        let notifier = RecordingNotifier()
        let steps = AsyncRecorder<String>()
        let slowReload = SlowReloadListener(steps: steps)
        let clock = TestClock()
        let daemon = makeDaemon(
            [slowReload],
            notifier: notifier,
            log: log,
            watchdog: Watchdog(interval: .milliseconds(400)),
            clock: clock
        )
        let running = Task { await daemon.run() }
        try await notifier.waitForReady()
        // A ping at 200 ms; the next round is armed for 400 ms.
        try await clock.waitForSleep(until: .milliseconds(200))
        clock.advance(to: .milliseconds(200))
        try await notifier.notifications.wait { $0.contains([.watchdog]) }
        try await clock.waitForSleep(until: .milliseconds(400))
        try await steps.wait { $0.contains("start") }
        let context = try #require(slowReload.context)
        context.requestReload()
        try await steps.wait { $0.contains("prepare") }
        try await clock.waitForSleep(until: .milliseconds(800))  // the reload's 600 ms
        context.requestTermination("test")
        // A round between the stop request and STOPPING=1 (which waits for the reload): its wait
        // ended before the stop did, so it runs before run() returns.
        clock.advance(to: .milliseconds(400))
        clock.advance(to: .milliseconds(800))
        #expect(await running.value == 0)
        let values = log.entries
        #expect(!values.contains { $0.messageID == LifecycleMessageID.watchdogFault.rawValue }, "\(values)")
    }

    @Test func healthBudgetsLongerThanTheProbeTimeoutAreCutWithOneWarningNamingTheListener() async throws {
        let log = memoryLog()
        let notifier = RecordingNotifier()
        let wedged = Gate()  // never opened
        let slow = RecordingListener("slow", log: AsyncRecorder(), behaviors: ["health": .wait(wedged)])
        let quickLog = AsyncRecorder<String>()
        let quick = RecordingListener("quick", budgets: .init(health: .milliseconds(50)), log: quickLog)
        // WatchdogSec=400ms: the probe waits 100 ms; the default health budget is 2 s.
        let daemon = makeDaemon(
            [slow, quick],
            notifier: notifier,
            log: log,
            watchdog: Watchdog(interval: .milliseconds(400))
        )
        let running = Task { await daemon.run() }
        try await notifier.waitForReady()
        // Each probe goes on to the next listener once the wedged check was cut (at 100 ms, not
        // 2 s) and its failure logged: by the second probe of 'quick', one of 'slow' has failed.
        try await quickLog.wait { $0.filter { $0 == "quick.health" }.count >= 2 }
        #expect(
            log.entries.contains {
                $0.text == "Listener 'slow' failed its health check: did not finish within its health budget of 100 ms"
            }
        )
        running.cancel()
        _ = await running.value
        let warnings = log.entries.filter { $0.text.hasPrefix("Health budget") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.level == .warning)
        #expect(warnings.first?.text.contains("'slow' (2.0 seconds)") == true)
        #expect(warnings.first?.text.contains("'quick'") == false)
    }

    @Test func theHealthBudgetWarningNamesEachListenerAndSaysWhatToDo() {
        let watchdog = Watchdog(interval: .seconds(4))
        #expect(Daemon.healthBudgetWarning([], watchdog: watchdog) == nil)
        #expect(
            Daemon.healthBudgetWarning([("configuration", .seconds(2)), ("http", .seconds(5))], watchdog: watchdog)
                == "Health budget longer than the watchdog probe's timeout of 1.0 seconds (a quarter of WatchdogSec=4.0 seconds): "
                + "'configuration' (2.0 seconds), 'http' (5.0 seconds); cut to 1.0 seconds. "
                + "Give these listeners a shorter health budget (ListenerBudgets.health), or raise WatchdogSec=."
        )
    }
}

/// Takes 600 ms of its clock to prepare each reload (three watchdog ping intervals in the test
/// above).
private final class SlowReloadListener: Listener {
    let name = "slow-reload"
    let steps: AsyncRecorder<String>
    private let captured = Mutex<ListenerContext?>(nil)
    init(steps: AsyncRecorder<String>) { self.steps = steps }
    var context: ListenerContext? { captured.withLock { $0 } }
    var budgets: ListenerBudgets? { ListenerBudgets(health: .milliseconds(50)) }

    func start(context: ListenerContext) async throws {
        captured.withLock { $0 = context }
        steps.append("start")
    }

    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        steps.append("prepare")
        try await context.clock.sleep(for: .milliseconds(600))
        return .accept
    }
}

/// A daemon's own `PeriodicTask` (TestingADaemon.md's `Ticker`, in ReadmeSnippets.swift) chooses
/// its clock at each start: a listener reused in a second run follows that run's clock (it kept
/// the first run's for good, which nobody advanced any more: a reviewer's find).
@Suite struct OwnPeriodicTaskTests {
    @Test func aListenerReusedInASecondRunFollowsTheSecondRunsClock() async throws {
        let ticks = AsyncRecorder<String>()
        let ticker = Ticker { ticks.append("tick") }
        let first = TestClock()
        try await withRunningDaemon(listeners: [ticker], clock: first) { _ in
            try await first.waitForSleep(until: .seconds(10))
            first.advance(by: .seconds(10))
            try await ticks.wait { $0.count == 1 }
        }
        let second = TestClock()
        try await withRunningDaemon(listeners: [ticker], clock: second) { _ in
            try await second.waitForSleep(until: .seconds(10))
            second.advance(by: .seconds(10))
            try await ticks.wait { $0.count == 2 }
        }
    }

    /// A budget of `.seconds(Int64.max)` ("no limit") trapped the process on the default
    /// executor: the hook's budget timer went to `Task.sleep`, whose nanoseconds overflowed
    /// (helper 54). Now a sleep beyond a century sleeps a century.
    @Test func aBudgetBeyondACenturyDoesNotTrap() async throws {
        let log = AsyncRecorder<String>()
        let slow = ServiceListener(
            name: "slow",
            budgets: ListenerBudgets(start: .seconds(Int64.max), terminate: .seconds(Int64.max))
        ) { ready in
            try await ready.context.sleep(for: .milliseconds(20))
            ready()
            log.append("ready")
            _ = try await ready.waitForStop()
        }
        try await withRunningDaemon(listeners: [slow]) { _ in
            try await log.wait { $0 == ["ready"] }
        }
        let forever = Task { try await EventLoopExecutor.sleep(for: .seconds(Int64.max)) }
        forever.cancel()
        await #expect(throws: CancellationError.self) { try await forever.value }
    }

    /// A listener's own delay on the daemon's clock: a test advances it as it advances the
    /// budgets (a supervisor's restart delay could not be: it slept on the event loop's timer,
    /// helper 52).
    @Test func aListenersSleepFollowsTheTestClock() async throws {
        let log = AsyncRecorder<String>()
        let clock = TestClock()
        let listener = ServiceListener(name: "restarter") { ready in
            ready()
            try await ready.context.sleep(for: .seconds(5))
            log.append("slept")
            _ = try await ready.waitForStop()
        }
        try await withRunningDaemon(listeners: [listener], clock: clock) { _ in
            try await clock.waitForSleep(until: .seconds(5))
            #expect(log.values.isEmpty)
            clock.advance(by: .seconds(5))
            try await log.wait { $0 == ["slept"] }
        }
    }

    /// Started outside any daemon, stopped, then started from a hook: the daemon's clock.
    @Test func aTaskFirstScheduledOutsideADaemonTakesTheDaemonsClockWhenStartedAgain() async throws {
        let ticks = AsyncRecorder<String>()
        let task = PeriodicTask()
        task.schedule(every: .seconds(10)) { ticks.append("outside") }
        await task.stop()
        let clock = TestClock()
        let listener = ServiceListener(name: "ticker") { ready in
            task.schedule(every: .seconds(10)) { ticks.append("tick") }
            ready()
            _ = try? await ready.waitForStop()
            await task.stop()
        }
        try await withRunningDaemon(listeners: [listener], clock: clock) { _ in
            try await clock.waitForSleep(until: .seconds(10))
            clock.advance(by: .seconds(10))
            try await ticks.wait { $0 == ["tick"] }
        }
    }
}
