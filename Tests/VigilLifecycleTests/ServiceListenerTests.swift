import Logging
import ServiceLifecycle
import Synchronization
import Testing
import VigilPlatform
import VigilTesting

@testable import VigilLifecycle

/// Records notifications and lifecycle records in the one log the parts write to, so a test can
/// check the order across them: `notify READY=1`, `record stopped`, `part.drained`.
private final class Timeline: ServiceManagerNotifier, LifecycleObserver {
    let log: AsyncRecorder<String>
    init(_ log: AsyncRecorder<String>) { self.log = log }

    func notify(_ messages: [NotifyMessage]) throws {
        for message in messages { log.append("notify \(message)") }
    }

    func observe(_ record: LifecycleRecord) {
        switch record.kind {
        case .started: log.append("record started")
        case .startFailed(let listener, let reason): log.append("record startFailed \(listener): \(reason)")
        case .stopped: log.append("record stopped")
        case .fatalFault(let listener, let reason): log.append("record fatalFault \(listener): \(reason)")
        default: break
        }
    }
}

private func makeGroup(
    _ listeners: [any Listener],
    log: AsyncRecorder<String>,
    clock: TestClock? = nil
) throws -> ListenerGroup {
    let timeline = Timeline(log)
    var configuration = ListenerGroup.Configuration(
        logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
        signals: SignalMap(),
        observers: [timeline]
    )
    configuration.notifier = timeline
    if let clock { configuration.clock = clock.loopClock }
    return try ListenerGroup(listeners: listeners, configuration: configuration)
}

private func index(_ entry: String, in log: [String]) -> Int? {
    log.firstIndex(of: entry)
}

/// A service in the style of Hummingbird's `Application`: it reports readiness through a
/// callback, then serves until graceful shutdown and drains an in-flight operation.
private struct FakeServer: Service {
    let log: AsyncRecorder<String>
    let bind: Gate
    let inFlight: Gate
    let onServerRunning: @Sendable () -> Void

    func run() async throws {
        log.append("server.binding")
        await bind.wait()
        log.append("server.bound")
        onServerRunning()
        try? await gracefulShutdown()
        log.append("server.draining")
        await inFlight.wait()
        log.append("server.drained")
    }
}

struct BindFailed: Error, CustomStringConvertible {
    var description: String { "cannot bind 127.0.0.1:8080: address already in use" }
}

@Suite struct ServiceListenerTests {
    @Test func readyFollowsTheServicesOwnReadiness() async throws {
        let log = AsyncRecorder<String>()
        let bind = Gate()
        let inFlight = Gate()
        inFlight.open()
        let http = ServiceListener(name: "http") { ready in
            FakeServer(log: log, bind: bind, inFlight: inFlight, onServerRunning: { ready() })
        }
        let group = try makeGroup([http], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("server.binding") }
        // The start hook waits for the bind, so READY=1 cannot have gone out.
        #expect(!log.values.contains("notify ready"))
        bind.open()
        try await log.wait { $0.contains("notify ready") }
        let values = log.values
        #expect(try #require(index("server.bound", in: values)) < #require(index("notify ready", in: values)))
        group.requestTermination(.requested("test"))
        try await running.value
    }

    @Test func aPartThatThrowsBeforeItIsReadyFailsTheStartWithItsReason() async throws {
        let log = AsyncRecorder<String>()
        let http = ServiceListener(name: "http", run: { _ in throw BindFailed() })
        let group = try makeGroup([http], log: log)
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(error?.code == .startFailed)
        #expect(error?.listener == "http")
        let values = log.values
        #expect(!values.contains("notify ready"))
        #expect(
            values.contains("notify status: Failed to start: http cannot bind 127.0.0.1:8080: address already in use")
        )
        #expect(values.contains("record startFailed http: cannot bind 127.0.0.1:8080: address already in use"))
    }

    @Test func aPartThatReturnsBeforeItIsReadyFailsTheStart() async throws {
        let log = AsyncRecorder<String>()
        let group = try makeGroup([ServiceListener(name: "quick", run: { _ in })], log: log)
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(
            error?.message
                == "Start-up failed: 'quick' ended before it was ready (it returned without calling ready())."
        )
        #expect(!log.values.contains("notify ready"))
    }

    @Test func aPartNotReadyWithinTheStartBudgetIsCancelledAndFailsTheStart() async throws {
        let log = AsyncRecorder<String>()
        let slow = ServiceListener(name: "slow", budgets: .init(start: .milliseconds(100))) { _ in
            log.append("slow.waiting")
            do {
                try await Task.sleep(for: .seconds(3600))
            } catch {
                log.append("slow.cancelled")
                throw error
            }
        }
        let group = try makeGroup([slow], log: log)
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(error?.message == "Start-up failed: 'slow' did not finish within its start budget of 100 ms.")
        try await log.wait { $0.contains("slow.cancelled") }
    }

    /// A negative budget is named as it is: it read "within its start budget of 0 µs" (helper 54).
    @Test func aNegativeBudgetIsNamedAsItIs() async throws {
        let log = AsyncRecorder<String>()
        let slow = ServiceListener(name: "slow", budgets: .init(start: .seconds(-5))) { _ in
            try await Task.sleep(for: .seconds(3600))
        }
        let group = try makeGroup([slow], log: log)
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(error?.message == "Start-up failed: 'slow' did not finish within its start budget of -5 s.")
    }

    @Test func stopShutsThePartDownGracefullyAndStoppedComesAfterItsEnd() async throws {
        let log = AsyncRecorder<String>()
        let bind = Gate()
        bind.open()
        let inFlight = Gate()
        let http = ServiceListener(name: "http") { ready in
            FakeServer(log: log, bind: bind, inFlight: inFlight, onServerRunning: { ready() })
        }
        // "http" starts after the configuration listener, so it stops before it.
        let other = RecordingListener("configuration", log: log)
        let daemon = try makeGroup([other, http], log: log)
        let running = Task { try await daemon.run() }
        try await log.wait { $0.contains("notify ready") }
        daemon.requestTermination(.requested("test"))
        try await log.wait { $0.contains("server.draining") }
        // An operation is in flight: the part has not ended, so the lifecycle has not stopped.
        #expect(!log.values.contains("record stopped"))
        #expect(!log.values.contains("configuration.terminate"))
        inFlight.open()
        try await running.value
        let values = log.values
        let drained = try #require(index("server.drained", in: values))
        #expect(drained < (try #require(index("configuration.terminate", in: values))))
        #expect(drained < (try #require(index("record stopped", in: values))))
    }

    @Test func aPartThatIgnoresGracefulShutdownIsCancelledAtItsTerminateBudgetAndTheStopFails() async throws {
        let log = AsyncRecorder<String>()
        // A 10 s budget on the test clock: 9 s of grace, then the longest time the listener
        // leaves for the cancelled part to end (1 s), which the test clock never lets pass.
        let clock = TestClock()
        let stubborn = ServiceListener(name: "stubborn", budgets: .init(terminate: .seconds(10))) { ready in
            ready()
            do {
                try await Task.sleep(for: .seconds(3600))  // ignores graceful shutdown, honours cancellation
            } catch {
                log.append("stubborn.cancelled")
            }
        }
        let group = try makeGroup([stubborn], log: log, clock: clock)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("notify ready") }
        group.requestTermination(.requested("test"))
        // The grace period's timer and the budget's watcher (it asks for more time at 1 s) are
        // armed; a moment before the grace runs out the part still runs.
        try await clock.waitForSleep(until: .seconds(9))
        try await clock.waitForSleep(until: .seconds(1))
        clock.advance(by: .seconds(9) - .milliseconds(1))
        try await log.wait { $0.contains("notify extend timeout by 10000000 µs") }
        #expect(!log.values.contains("stubborn.cancelled"))
        clock.advance(by: .milliseconds(1))
        let error = await #expect(throws: ListenerGroupError.self) { try await running.value }
        #expect(error?.code == .stopFailed)
        #expect(
            error?.message
                == "Stopped with errors: 'stubborn' did not shut down gracefully within 9 s (its terminate budget is 10 s); it was cancelled"
        )
        let values = log.values
        #expect(
            try #require(index("stubborn.cancelled", in: values)) < (try #require(index("record stopped", in: values)))
        )
    }

    @Test func aPartThatEndsWhileTheDaemonRunsIsAFatalFaultAndStopsTheDaemonWithAnError() async throws {
        let log = AsyncRecorder<String>()
        let crash = Gate()
        let worker = ServiceListener(
            name: "worker",
            run: { ready in
                ready()
                await crash.wait()
                throw BindFailed()
            }
        )
        let group = try makeGroup([worker], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("notify ready") }
        crash.open()
        let error = await #expect(throws: ListenerGroupError.self) { try await running.value }
        #expect(error?.code == .stopFailed)
        let reason = "ended while the daemon was running: cannot bind 127.0.0.1:8080: address already in use"
        #expect(error?.message == "Stopped with errors: 'worker' \(reason)")
        let values = log.values
        #expect(values.contains("record fatalFault worker: \(reason)"))
        #expect(values.contains("notify watchdog trigger"))
    }

    @Test func theContextCarriesTheBudgetsAListenerIsHeldTo() async throws {
        let seen = Mutex<[ListenerBudgets]>([])
        let own = ListenerBudgets(terminate: .seconds(3))
        let probe = ServiceListener(name: "own", budgets: own) { ready in
            seen.withLock { $0.append(ready.context.budgets(for: "own")) }
            seen.withLock { $0.append(ready.context.budgets(for: "unknown")) }
            ready()
            try? await gracefulShutdown()
        }
        try await withRunningDaemon(listeners: [probe], budgets: .init(terminate: .seconds(7))) { _ in }
        #expect(seen.withLock { $0 } == [own, ListenerBudgets(terminate: .seconds(7))])
    }

    /// The proof with a real socket: bound and listening before READY=1, so a client that
    /// connects right after READY=1 is never refused.
    @Test func aClientConnectingRightAfterReadyIsNeverRefused() async throws {
        let port = Mutex<UInt16>(0)
        let tcp = ServiceListener(
            name: "tcp",
            run: { ready in
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                guard fd >= 0 else { throw BindFailed() }
                defer { close(fd) }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = 0
                let bound = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                guard bound == 0, listen(fd, 64) == 0 else { throw BindFailed() }
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                _ = withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
                }
                port.withLock { $0 = UInt16(bigEndian: address.sin_port) }
                ready()
                try? await gracefulShutdown()
            }
        )
        try await withRunningDaemon(listeners: [tcp]) { _ in
            let port = port.withLock { $0 }
            #expect(port != 0)
            var refused = 0
            for _ in 0..<20 {
                let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(client) }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = port.bigEndian
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                if connected != 0 { refused += 1 }
            }
            #expect(refused == 0)
        }
    }

    @Test func aClosureThatReturnsAServiceRunsThatService() async throws {
        let log = AsyncRecorder<String>()
        let bind = Gate()
        bind.open()
        let inFlight = Gate()
        inFlight.open()
        // A one-expression closure that returns a Service picks the service form, not `run:`.
        let http = ServiceListener(name: "http") { ready in
            FakeServer(log: log, bind: bind, inFlight: inFlight, onServerRunning: { ready() })
        }
        try await withRunningDaemon(listeners: [http]) { _ in }
        #expect(log.values == ["server.binding", "server.bound", "server.draining", "server.drained"])
    }

    @Test func aClosureThatCancelsItsWorkAtGracefulShutdownStopsCleanly() async throws {
        let log = AsyncRecorder<String>()
        let (messages, producer) = AsyncStream.makeStream(of: Int.self)
        let consumer = ServiceListener(
            name: "queue",
            run: { ready in
                ready()
                try await cancelWhenGracefulShutdown {
                    for await message in messages { log.append("handled \(message)") }
                    try Task.checkCancellation()
                }
            }
        )
        try await withRunningDaemon(listeners: [consumer]) { _ in
            producer.yield(1)
            try await log.wait { $0.contains("handled 1") }
        }
        // The stop cancelled the loop (a CancellationError, which is no failure): withRunningDaemon did not throw.
        #expect(log.values == ["handled 1"])
        producer.finish()
    }

    // MARK: Reloads and the stop deadline (issue 23 item 2)

    @Test func thePartHearsACommittedReloadAndMayRejectOneWithoutASecondListener() async throws {
        let log = AsyncRecorder<String>()
        let part = ServiceListener(
            name: "part",
            dependencies: ["configuration"],
            prepareReload: { reload, _ in
                let limit = reload.proposed[Limit.self] ?? -1
                return limit > 2 ? .reject(reason: "limit: must be at most 2 (found \(limit))") : .accept
            },
            commitReload: { _, context in
                // The configuration committed first: the new value is in force.
                log.append("part.commit \(context.values[Limit.self] ?? -1)")
            },
            run: { ready in
                ready()
                try? await gracefulShutdown()
            }
        )
        let group = try makeGroup([LimitSource(), part], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("notify ready") }
        group.requestReload()
        try await log.wait { $0.contains("part.commit 2") }
        group.requestReload()
        try await log.wait { $0.contains { $0.contains("reload rejected: part: limit: must be at most 2 (found 3)") } }
        #expect(!log.values.contains("part.commit 3"))
        group.requestTermination(.requested("test"))
        try await running.value
    }

    /// A part hears `SIGUSR1`/`SIGUSR2` through its own closure, within its user-signal budget
    /// (a helper's job runner needed a second listener and a wake-up of its own for "run now").
    @Test func thePartHearsAUserSignalWithoutASecondListener() async throws {
        let log = AsyncRecorder<String>()
        let part = ServiceListener(
            name: "part",
            userSignal: { signal, context in
                log.append("part.userSignal \(signal) \(context.budgets(for: "part").userSignal)")
            },
            run: { ready in
                ready()
                try? await gracefulShutdown()
            }
        )
        let group = try makeGroup([part], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("notify ready") }
        group.requestUserSignal(.sigusr1)
        try await log.wait { $0.contains { $0.hasPrefix("part.userSignal SIGUSR1") } }
        group.requestUserSignal(.sigusr2)
        try await log.wait { $0.contains { $0.hasPrefix("part.userSignal SIGUSR2") } }
        group.requestTermination(.requested("test"))
        try await running.value
        #expect(
            log.values.filter { $0.hasPrefix("part.userSignal") } == [
                "part.userSignal SIGUSR1 10.0 seconds", "part.userSignal SIGUSR2 10.0 seconds",
            ]
        )
    }

    @Test func thePartIsHandedItsStopDeadlineBeforeGracefulShutdown() async throws {
        let log = AsyncRecorder<String>()
        let handed = Mutex<ContinuousClock.Instant?>(nil)
        let observed = Mutex<ContinuousClock.Instant?>(nil)
        let part = ServiceListener(name: "part", budgets: .init(terminate: .seconds(5))) { ready in
            #expect(ready.stopDeadline == nil)
            ready.onStop { deadline in
                handed.withLock { $0 = deadline }
                log.append("part.onStop")
            }
            ready()
            try? await gracefulShutdown()
            observed.withLock { $0 = ready.stopDeadline }
            log.append("part.graceful")
        }
        let group = try makeGroup([part], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("notify ready") }
        let before = ContinuousClock.now
        group.requestTermination(.requested("test"))
        try await running.value
        let after = ContinuousClock.now
        // The terminate budget (5 s) less a tenth of it (at most a second) is the grace, 4.5 s; the
        // deadline comes a twentieth of it (at most half a second) earlier: 4.275 s after the stop began.
        let deadline = try #require(handed.withLock { $0 })
        #expect(deadline >= before.advanced(by: .milliseconds(4275)))
        #expect(deadline <= after.advanced(by: .milliseconds(4275)))
        #expect(observed.withLock { $0 } == deadline)
        let values = log.values
        #expect(try #require(index("part.onStop", in: values)) < (try #require(index("part.graceful", in: values))))
    }

    @Test func aSecondStopRequestCancelsTheDrainingPartAtOnceAndMovesItsDeadlineToNow() async throws {
        // A job queue in miniature: at stop it drains (waits for its jobs until the deadline, or
        // cancellation), and when cancelled it kills its jobs before it returns.
        let log = AsyncRecorder<String>()
        let clock = TestClock()
        let deadlines = Mutex<[ContinuousClock.Instant]>([])
        let cancelledAt = Mutex<Duration?>(nil)
        let jobs = ServiceListener(name: "jobs", budgets: .init(terminate: .seconds(20))) { ready in
            ready.onStop { deadline in
                deadlines.withLock { $0.append(deadline) }
                log.append("jobs.onStop")
            }
            ready()
            try? await gracefulShutdown()
            await withTaskCancellationHandler {
                try? await clock.sleep(until: .seconds(3600))  // the jobs never finish by themselves
            } onCancel: {
                cancelledAt.withLock { $0 = clock.now }
                log.append("jobs.cancelled")
            }
            log.append("jobs.killed")
        }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(listeners: [jobs], clock: clock) { daemon in
                daemon.group.requestTermination(.signal(.sigterm))
                // Draining: the grace period's timer (19 s) is armed; 2 s pass, then an admin's
                // second SIGTERM.
                try await clock.waitForSleep(until: .seconds(19))
                clock.advance(by: .seconds(2))
                #expect(!log.values.contains("jobs.cancelled"))
                daemon.group.requestTermination(.signal(.sigterm))
            }
        }
        #expect(error?.message == "Stopped with errors: 'jobs' was cut short by a second stop request")
        // The daemon's run returned only after the part had heard the request and killed its jobs.
        #expect(log.values.suffix(3) == ["jobs.onStop", "jobs.cancelled", "jobs.killed"])
        #expect(cancelledAt.withLock { $0 } == .seconds(2), "cancelled at the second request, with no time passing")
        let handed = deadlines.withLock { $0 }
        #expect(handed.count == 2, "the deadline moved to the second request: \(handed)")
        if handed.count == 2 {
            #expect(handed[1] < handed[0])
            #expect(handed[1] <= .now)
        }
    }

    /// `waitForStop()` returns once, with the first deadline, where an `onStop` handler hears a
    /// second stop request again: a part that resumed a continuation from its handler (as the
    /// docs once showed) trapped here, resumed twice while it drained.
    @Test func waitForStopReturnsOnceThoughASecondStopRequestCallsTheHandlersAgain() async throws {
        let log = AsyncRecorder<String>()
        let clock = TestClock()
        let waited = Mutex<[ContinuousClock.Instant]>([])
        let heard = Mutex<[ContinuousClock.Instant]>([])
        let jobs = ServiceListener(name: "jobs", budgets: .init(terminate: .seconds(20))) { ready in
            ready.onStop { deadline in heard.withLock { $0.append(deadline) } }
            ready()
            let deadline = try await ready.waitForStop()
            waited.withLock { $0.append(deadline) }
            log.append("jobs.stopping")
            await withTaskCancellationHandler {
                try? await clock.sleep(until: .seconds(3600))  // draining, until cancelled
            } onCancel: {
                log.append("jobs.cancelled")
            }
        }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(listeners: [jobs], clock: clock) { daemon in
                daemon.group.requestTermination(.signal(.sigterm))
                try await log.wait { $0.contains("jobs.stopping") }
                try await clock.waitForSleep(until: .seconds(19))
                daemon.group.requestTermination(.signal(.sigterm))
            }
        }
        #expect(error?.message == "Stopped with errors: 'jobs' was cut short by a second stop request")
        #expect(log.values.suffix(2) == ["jobs.stopping", "jobs.cancelled"])
        let handlerHeard = heard.withLock { $0 }
        #expect(handlerHeard.count == 2, "the handler heard both requests: \(handlerHeard)")
        #expect(
            waited.withLock { $0 } == Array(handlerHeard.prefix(1)),
            "the wait returned once, with the first deadline"
        )
    }

    /// A part cancelled before the stop begins (its start budget ran out before it was ready)
    /// leaves `waitForStop()` with `CancellationError`, where a continuation resumed only by
    /// `onStop` would have waited for ever.
    @Test func waitForStopThrowsWhenThePartIsCancelledFirst() async throws {
        let log = AsyncRecorder<String>()
        let slow = ServiceListener(name: "slow", budgets: .init(start: .milliseconds(100))) { ready in
            do {
                _ = try await ready.waitForStop()
                log.append("slow.returned")
            } catch is CancellationError {
                log.append("slow.cancelled")
            }
        }
        let group = try makeGroup([slow], log: log)
        let error = await #expect(throws: ListenerGroupError.self) { try await group.run() }
        #expect(error?.message == "Start-up failed: 'slow' did not finish within its start budget of 100 ms.")
        try await log.wait { $0.contains("slow.cancelled") }
        #expect(!log.values.contains("slow.returned"))
    }

    @Test func twoStopRequestsDuringAReloadStillCancelThePartThatStopsFirst() async throws {
        let log = AsyncRecorder<String>()
        let reloading = Gate()
        let slow = RecordingListener("configuration", log: log, behaviors: ["prepare": .wait(reloading)])
        let jobs = ServiceListener(name: "jobs", dependencies: ["configuration"]) { ready in
            ready()
            await withTaskCancellationHandler {
                try? await Task.sleep(for: .seconds(3600))  // drains forever, honours cancellation
            } onCancel: {
                log.append("jobs.cancelled")
            }
            log.append("jobs.killed")
        }
        let error = await #expect(throws: ListenerGroupError.self) {
            try await withRunningDaemon(listeners: [slow, jobs]) { daemon in
                daemon.group.requestReload()
                try await log.wait { $0.contains("configuration.prepare") }
                // Both stop requests wait for the reload; then the stop begins urgent.
                daemon.group.requestTermination(.signal(.sigterm))
                daemon.group.requestTermination(.signal(.sigterm))
                reloading.open()
            }
        }
        #expect(
            error?.message
                == "Stopped with errors: 'jobs' was cut short by a second stop request"
        )
        #expect(log.values.contains(["jobs.cancelled", "jobs.killed"]), "the part ended before the daemon's run")
        let order = log.values
        #expect(
            order.firstIndex(of: "jobs.killed").map { killed in
                order.firstIndex(of: "configuration.terminate").map { killed < $0 }
            }
                == true,
            "the listener after it still stops, once the part ended: \(order)"
        )
    }

    /// A part that ends while the daemon stops, before its own terminate (its input closed by a
    /// listener that stopped first), was a fatal fault: `WATCHDOG=trigger` in the middle of the
    /// stop, and its stop request cut the listener that was stopping short (a helper's finding).
    /// Now it is part of the stop: no fault, and the stop is clean.
    @Test func aPartThatEndsDuringTheStopBeforeItsTerminateIsNoFault() async throws {
        struct Producer: Listener {
            let name = "http"
            let dependencies = ["writer"]  // stops before the writer
            let feed: AsyncStream<Int>.Continuation
            let writer: ServiceListener
            let log: AsyncRecorder<String>
            func terminate(reason: TerminationReason, context: ListenerContext) async throws {
                feed.finish()  // no more jobs for the writer, which then ends
                // Returns once the writer's part has ended and its listener heard of it.
                await writer.partTask?.value
                log.append("http.closed")
            }
        }
        let log = AsyncRecorder<String>()
        let (jobs, feed) = AsyncStream<Int>.makeStream()
        let writer = ServiceListener(name: "writer") { ready in
            ready()
            for await _ in jobs {}
        }
        let group = try makeGroup([writer, Producer(feed: feed, writer: writer, log: log)], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("record started") }
        group.requestTermination(.signal(.sigterm))
        try await running.value
        #expect(log.values.contains("http.closed"))
        #expect(
            !log.values.contains { $0.contains("WATCHDOG=trigger") || $0.hasPrefix("record fatalFault") },
            "\(log.values)"
        )
    }

    /// A listener that asks for a stop from its own terminate (a shared shutdown path) cut
    /// itself short, as a second SIGTERM would, and held every listener after it to a second
    /// (a helper's finding). A request from code while stopping is the stop under way now.
    @Test func aStopRequestFromCodeWhileStoppingCutsNothing() async throws {
        struct Worker: Listener {
            let name = "worker"
            let dependencies = ["store"]
            let log: AsyncRecorder<String>
            let flushed: Gate
            func terminate(reason: TerminationReason, context: ListenerContext) async throws {
                context.requestTermination("worker is shutting down")
                log.append("worker.flushing")
                await flushed.wait()
                try Task.checkCancellation()  // a flush that stops when cut short
                log.append("worker.flushed")
            }
        }
        let log = AsyncRecorder<String>()
        let flushed = Gate()
        let store = RecordingListener("store", log: log)
        let group = try makeGroup([store, Worker(log: log, flushed: flushed)], log: log)
        let running = Task { try await group.run() }
        try await log.wait { $0.contains("record started") }
        group.requestTermination(.signal(.sigterm))
        try await flushed.waitForWaiters(1)
        flushed.open()
        try await running.value
        #expect(log.values.contains(["worker.flushed", "store.terminate", "store.terminate.done"]), "\(log.values)")
    }
}

private enum Limit: ValueKey {
    typealias Value = Int
}

/// A configuration listener in miniature: the limit is the generation a reload would make.
private struct LimitSource: Listener {
    let name = "configuration"

    func start(context: ListenerContext) async throws {
        context.values[Limit.self] = 1
    }

    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        reload.proposed[Limit.self] = reload.generation
        return .accept
    }

    func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        context.values[Limit.self] = reload.proposed[Limit.self]
    }
}
