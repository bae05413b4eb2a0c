import CoreMetrics
import Logging
import ServiceLifecycle
import Synchronization

/// The mediator: owns the daemon's signals and fans each lifecycle event out to its listeners,
/// one event at a time, in dependency order.
///
/// ```swift
/// let group = try ListenerGroup(
///     listeners: [configuration, persistence, heartbeat],
///     configuration: .init(logger: logger)
/// )
/// try await group.run()
/// ```
///
/// What it guarantees:
/// - **One event at a time.** Start-up commands run in order, then listeners start in
///   dependency order; `READY=1` is sent only when all have started. Terminate runs in reverse.
/// - **Two-phase reload.** Every listener prepares; if all accept, every listener commits and
///   the generation goes up by one; if one rejects (or throws, or overruns), every prepared
///   listener aborts and the daemon runs on unchanged. Either way the reload ends with `READY=1`.
/// - **Coalescing.** Reload requests that arrive during a reload collapse into exactly one
///   follow-up reload; a stop request lets a running reload finish, then stops.
/// - **Isolation.** Each hook runs within its budget (``ListenerBudgets``); a hook that throws
///   or overruns is reported with its listener's name and the others still hear the event. A
///   failed start stops the listeners already started, in reverse, and ``run()`` throws.
/// - **A second stop request** during shutdown cuts it short: the running `terminate` hook is
///   cancelled at once and given at most a second (at most its budget) to return; the listeners
///   after it are still asked to stop, each within a second (a state store's final checkpoint
///   is among them), and ``run()`` throws ``ListenerGroupError/Code/stopFailed`` — unless the
///   hook cut short returned within its second (it did its work: a final checkpoint of a few
///   milliseconds that the request caught), which counts as a clean stop.
///
/// It is a swift-service-lifecycle `Service`: run it in a `ServiceGroup` next to a daemon's own
/// services with ``serviceConfiguration``, so that a stop signal shuts the whole group down
/// gracefully (and give the `ServiceGroup` no signals of its own). Services beside the group are
/// not part of its readiness or its stop: `READY=1` does not wait for them and "Stopped" does
/// not wait for their drain. A service that must be up before `READY=1` (an HTTP server) runs
/// inside the group as a ``ServiceListener`` instead.
///
/// - Important: ``run()`` installs process-wide handlers for the signals in
///   `Configuration/signals` before anything starts, and owns them until it returns.
package final class ListenerGroup: Service {
    /// How a group runs.
    package struct Configuration: Sendable {
        /// Which signals the group owns and what each one means.
        package var signals: SignalMap
        /// Default budgets for listeners that declare none.
        package var budgets: ListenerBudgets
        /// Where readiness, reloads, stops and status go (`SystemdNotifier` under systemd).
        package var notifier: any ServiceManagerNotifier
        /// Who hears each ``LifecycleRecord`` (the logging listener, a status file, tests).
        package var observers: [any LifecycleObserver]
        /// The logger for the group's own messages, also handed to listeners.
        package var logger: Logger
        /// The values listeners share; pass a store to seed it.
        package var values: ValueStore
        /// After this long, a start or stop step tells the service manager it needs more time.
        package var extendTimeoutAfter: Duration
        /// Where `LifecycleMetrics` go: swift-metrics' bootstrapped factory unless given (so
        /// bootstrap a backend before building the configuration).
        package var metrics: any MetricsFactory
        /// A ceiling on every listener's health budget, or `nil` for none. Under a watchdog it
        /// is the probe's timeout: a health check allowed to run longer than the probe waits
        /// would only ever be reported as a missed ping. ``ListenerGroup/healthBudgetsOverLimit``
        /// names the listeners it shortens.
        package var maximumHealthBudget: Duration?
        /// The shortest time between two memory-pressure events: reports that come sooner (a
        /// PSI trigger fires at most once per window, but a FIFO can be written to at any rate)
        /// are dropped and counted in the next event's record. 1 s unless set.
        package var memoryPressureInterval: Duration = .seconds(1)
        /// The clock budgets, probe timeouts, the memory-pressure interval and the durations in
        /// ``LifecycleRecord``s count on: the monotonic clock, or a test's (VigilTesting's
        /// `TestClock`) that the test advances by hand.
        package var clock: LoopClock = .monotonic

        /// Creates a configuration with systemd's default signal map and default budgets.
        ///
        /// A group built from it reports to no service manager: `Daemon` (in `Vigil`) gives
        /// its group `SystemdNotifier`.
        package init(
            logger: Logger,
            signals: SignalMap = .default,
            budgets: ListenerBudgets = ListenerBudgets(),
            observers: [any LifecycleObserver] = [],
            values: ValueStore = ValueStore(),
            extendTimeoutAfter: Duration = .seconds(1),
            metrics: any MetricsFactory = MetricsSystem.factory,
            maximumHealthBudget: Duration? = nil
        ) {
            self.maximumHealthBudget = maximumHealthBudget
            self.logger = logger
            self.notifier = NoServiceManager()
            self.signals = signals
            self.budgets = budgets
            self.observers = observers
            self.values = values
            self.extendTimeoutAfter = extendTimeoutAfter
            self.metrics = metrics
        }

        /// This configuration, reporting to `notifier` (`Daemon` gives its group
        /// `SystemdNotifier`; tests a recorder).
        package func reporting(to notifier: any ServiceManagerNotifier) -> Self {
            var configuration = self
            configuration.notifier = notifier
            return configuration
        }
    }

    /// The context every listener receives.
    package let context: ListenerContext

    /// The listeners in the order they start (dependencies first).
    package let listeners: [any Listener]

    private let commands: [any StartupCommand]
    private let configuration: Configuration
    private let core: ListenerGroup.Core
    private let metrics: LifecycleMetrics
    private let discardedSignals: DiscardedSignalLog
    /// When the last memory-pressure event was let through, and how many were dropped since.
    private let pressure = Mutex<(last: Duration?, skipped: Int)>((nil, 0))
    /// Each listener's budgets as enforced (its own or the defaults, health capped).
    private let effectiveBudgets: [String: ListenerBudgets]
    private let defaultBudgets: ListenerBudgets

    /// The listeners whose health budget exceeds ``Configuration/maximumHealthBudget`` and is
    /// cut to it, with the budget each asked for; empty without a ceiling.
    package let healthBudgetsOverLimit: [(listener: String, health: Duration)]

    /// Builds a group, checking that every dependency exists and that there is no cycle.
    ///
    /// - Parameters:
    ///   - listeners: the listeners, in any order; their dependencies decide the start order,
    ///     declaration order breaks ties.
    ///   - startupCommands: steps that run in this order before any listener starts.
    ///   - configuration: signals, budgets, notifier, observers, logger.
    /// - Throws: ``ListenerGroupError`` naming a duplicate name, a missing dependency, or the
    ///   cycle (`a → b → a`).
    package init(
        listeners: [any Listener],
        startupCommands: [any StartupCommand] = [],
        configuration: Configuration
    ) throws {
        self.listeners = try DependencyOrder.sort(listeners, name: \.name, dependencies: \.dependencies)
        self.commands = startupCommands
        self.configuration = configuration
        self.discardedSignals = DiscardedSignalLog(logger: configuration.logger)
        self.core = Core(
            notifier: configuration.notifier,
            observers: configuration.observers,
            logger: configuration.logger,
            clock: configuration.clock
        )
        let limit = configuration.maximumHealthBudget
        func capped(_ budgets: ListenerBudgets) -> ListenerBudgets {
            guard let limit, budgets.health > limit else { return budgets }
            var budgets = budgets
            budgets.health = limit
            return budgets
        }
        var effective: [String: ListenerBudgets] = [:]
        var overLimit: [(listener: String, health: Duration)] = []
        for listener in self.listeners {
            let declared = listener.budgets ?? configuration.budgets
            if let limit, declared.health > limit { overLimit.append((listener.name, declared.health)) }
            effective[listener.name] = capped(declared)
        }
        self.effectiveBudgets = effective
        self.defaultBudgets = capped(configuration.budgets)
        self.healthBudgetsOverLimit = overLimit
        self.context = ListenerContext(
            values: configuration.values,
            logger: configuration.logger,
            core: core,
            budgets: effective,
            defaultBudgets: defaultBudgets
        )
        self.metrics = LifecycleMetrics(
            factory: configuration.metrics,
            listeners: self.listeners.map(\.name),
            commands: startupCommands.map(\.name)
        )
    }

    /// This group as a `ServiceGroup` entry whose end (after a stop signal) shuts the rest of
    /// the group down gracefully.
    package var serviceConfiguration: ServiceGroupConfiguration.ServiceConfiguration {
        .init(
            service: self,
            successTerminationBehavior: .gracefullyShutdownGroup,
            failureTerminationBehavior: .gracefullyShutdownGroup
        )
    }

    // MARK: requests

    /// Requests a reload, as the reload signal does. Requests made during a reload collapse
    /// into one follow-up reload.
    package func requestReload() { core.request(.reload) }

    /// Delivers a user-signal event, as `SIGUSR1` does.
    package func requestUserSignal(_ signal: ProcessSignal = .sigusr1) { core.request(.userSignal(signal)) }

    /// Reports memory pressure: a ``LifecycleEvent/memoryPressure`` event for every listener,
    /// unless one was let through less than ``Configuration/memoryPressureInterval`` ago (then
    /// it is dropped and counted). Requests while one waits collapse into it. Any thread.
    package func requestMemoryPressure() {
        let now = configuration.clock.now
        let interval = configuration.memoryPressureInterval
        let accepted = pressure.withLock { pressure -> Bool in
            if let last = pressure.last, now - last < interval {
                pressure.skipped += 1
                return false
            }
            pressure.last = now
            return true
        }
        if accepted { core.request(.memoryPressure) }
    }

    /// Requests a stop, as `SIGTERM` does. A second request during shutdown cancels the running
    /// `terminate` hook and hurries the listeners after it (see the type's documentation).
    package func requestTermination(_ reason: TerminationReason) { core.request(.terminate(reason)) }

    /// `true` once a stop was requested (by a signal, code, or the service group).
    package var terminationRequested: Bool { core.terminationRequested }

    /// `true` once the group is stopping (it sent `STOPPING=1`, or start-up failed) or stopped.
    package var isStopping: Bool { core.isStopping }

    /// `true` once every listener started and `READY=1` went out (and after, stopping included).
    package var hasStarted: Bool { core.hasStarted.load(ordering: .acquiring) }

    /// Makes a round trip through the mediator and every listener's ``Listener/checkHealth(context:)``.
    ///
    /// - Returns: `true` when the mediator answered within `timeout` and every listener was
    ///   healthy; `false` when it is wedged, a listener is unhealthy, or the daemon is stopping.
    package func probeHealth(timeout: Duration) async -> Bool {
        let answer = Mutex<CheckedContinuation<Bool, Never>?>(nil)
        let resume: @Sendable (Bool) -> Void = { healthy in
            answer.withLock { $0.take() }?.resume(returning: healthy)
        }
        var timer: Task<Void, Never>?
        var id: Int?
        let clock = configuration.clock
        let healthy = await withCheckedContinuation { continuation in
            answer.withLock { $0 = continuation }
            id = core.requestProbe(resume)
            // A timer task because the mediator may never answer: that is what a probe detects.
            timer = Task {
                try? await clock.sleep(for: timeout)
                resume(false)
            }
        }
        timer?.cancel()
        if let id { core.cancelProbe(id) }
        return healthy
    }

    // MARK: run

    /// Installs the signal handlers, runs the start-up commands, starts the listeners, sends
    /// `READY=1`, and handles events until a stop request; returns once every listener stopped.
    ///
    /// A `ServiceGroup`'s graceful shutdown, or cancelling the task, counts as a stop request.
    ///
    /// - Throws: ``ListenerGroupError`` with code ``ListenerGroupError/Code/startFailed`` when
    ///   a start-up command or a listener failed; the message names it and says why. With code
    ///   ``ListenerGroupError/Code/stopFailed`` after a stop in which a listener's `terminate`
    ///   threw or overran (its final work, a checkpoint say, was not done): every listener was
    ///   still asked to stop, and the daemon should exit non-zero.
    package func run() async throws {
        // A PeriodicTask that a hook (or a task it starts) schedules follows this group's clock:
        // a test's, advanced by hand, as the library's own timers do.
        try await PeriodicTask.$daemonClock.withValue(configuration.clock) { try await runOnItsClock() }
    }

    private func runOnItsClock() async throws {
        guard core.begin() else {
            throw ListenerGroupError(.alreadyRunning, "This ListenerGroup already ran; build a new one.")
        }
        let startedAt = configuration.clock.now
        let signals = configuration.signals
        let owner: SignalOwner?
        do {
            owner =
                signals.actions.isEmpty
                ? nil
                : try SignalOwner(signals: signals.signals, unowned: discardedSignals.record) {
                    [core, discardedSignals] signal in
                    if let event = signals.event(for: signal) {
                        core.request(event)
                    } else {
                        discardedSignals.record(signal)
                    }
                }
        } catch {
            // A second daemon in the process says nothing to the service manager: the unit's
            // status is the first one's, which runs on.
            if let errno = (error as? SignalWatchError)?.errno {
                core.send(phase: "Failed to start: \(error)", alone: true) { [$0, .errno(errno)] }
            }
            core.finish()
            throw ListenerGroupError(.startFailed, sentence("Start-up failed: \(error)"))
        }
        defer { owner?.release() }
        // A graceful shutdown of the service group is a stop request of the daemon's own; a
        // cancelled task is one from outside: made during a stop, it hurries it, as a second
        // SIGTERM does.
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await self.loop(startedAt: startedAt)
            } onGracefulShutdown: { [core] in
                core.request(.terminate(.requested("shutdown of the service group")))
            }
        } onCancel: { [core] in
            core.request(.terminate(.cancelled))
        }
    }

    private func loop(startedAt: Duration) async throws {
        var running: [any Listener] = []
        var doorbell = core.doorbell.makeAsyncIterator()
        while true {
            var drained = 0
            while true {
                // Events back to back (a reload that asks for the next, a burst of signals): let
                // the other tasks of this executor run between them, before the next is taken, so
                // that a stop read meanwhile (the loop reads its signalfd then) goes first.
                // Without it, on a cooperative pool one thread wide (one CPU) a reload requested
                // by every reload held the pool for good, and on vigild's loop the signalfd and
                // the watchdog's timer were never looked at again. Only when another event
                // waits: after a lone event the loop goes back to the doorbell, as before.
                if drained > 0, core.hasPendingEvent { await Task.yield() }
                guard let event = core.nextEvent() else { break }
                drained += 1
                switch event.wrapped {
                case .start: running = try await start(startedAt: startedAt)
                case .terminate(let reason):
                    let failures = await terminate(reason, listeners: running, startedAt: startedAt)
                    guard failures.isEmpty else {
                        throw ListenerGroupError(
                            .stopFailed,
                            "Stopped with errors: "
                                + failures.map { "'\($0.listener)' \($0.reason)" }.joined(separator: "; "),
                            listener: failures[0].listener
                        )
                    }
                    return
                case .healthProbe: await answerProbes()
                case .reload: await reload()
                case .userSignal(let signal): await deliver(signal)
                case .memoryPressure: await relieveMemoryPressure()
                }
            }
            if await doorbell.next() == nil, !core.terminationRequested {
                // Only cancellation ends the doorbell early, and that is a stop request.
                core.request(.terminate(.requested("cancellation")))
            }
        }
    }

    /// Calls one hook of each step in `steps` (listeners, start-up commands), in that order,
    /// each within its budget, timed and counted (``LifecycleMetrics``); `settle` hears the
    /// outcomes in order (only failures unless `settlesReturns`) and says whether to go on.
    /// Returns how many hooks were called.
    @discardableResult
    private func runHooks<Step: Sendable, Value: Sendable>(
        _ kind: LifecycleMetrics.Hook,
        of steps: [Step],
        name: @escaping @Sendable (Step) -> String,
        budget: @escaping @Sendable (Step) -> Duration,
        extendAfter: Duration? = nil,
        interruptible: Bool = false,
        interruptedKeepsItsBudget: Bool = false,
        settlesReturns: Bool = false,
        _ call: @escaping @Sendable (Step) async throws -> Value,
        settle: @escaping @Sendable (Step, HookOutcome<Value>) -> Bool
    ) async -> Int {
        let metrics = self.metrics
        return await core.runHooks(
            HookSequence(
                steps: steps,
                extendAfter: extendAfter,
                interruptible: interruptible,
                interruptedKeepsItsBudget: interruptedKeepsItsBudget,
                timed: metrics.timesHooks,
                settlesReturns: settlesReturns,
                budget: budget,
                hook: call,
                settle: { step, outcome, duration in
                    if let duration, let timer = metrics.timer(name(step), kind) {
                        timer.recordNanoseconds(Int64(clamping: duration.nanoseconds))
                    }
                    switch outcome {
                    case .returned: if !settlesReturns { return true }
                    case .threw: metrics.hookFailed(name(step), kind, kind: "threw")
                    case .overran: metrics.hookFailed(name(step), kind, kind: "overran")
                    case .interrupted: metrics.hookFailed(name(step), kind, kind: "interrupted")
                    }
                    return settle(step, outcome)
                }
            )
        )
    }

    /// A listener's budget for one hook, as enforced (its own or the defaults, health capped).
    private func budget(
        _ hook: any KeyPath<ListenerBudgets, Duration> & Sendable
    ) -> @Sendable (any Listener) -> Duration {
        let (effective, defaults) = (effectiveBudgets, defaultBudgets)
        return { (effective[$0.name] ?? defaults)[keyPath: hook] }
    }

    /// The terminate budget: after a second stop request cut a hook short, each listener after
    /// it still stops (the state store's final checkpoint is among them), within at most
    /// `Core.interruptionGrace`.
    private func terminateBudget() -> @Sendable (any Listener) -> Duration {
        let (budget, core) = (budget(\.terminate), core)
        return { core.terminateBudget(budget($0)) }
    }

    private static func reason<Value>(_ outcome: HookOutcome<Value>, budget: String) -> String? {
        switch outcome {
        case .returned: nil
        case .threw(let error) where error is CancellationError:
            "threw CancellationError, though the daemon cancelled nothing (a call inside it was cancelled, or it threw one of its own)"
        case .threw(let error): "\(error)"
        case .overran(let duration): "did not finish within its \(budget) budget of \(duration.formatted)"
        case .interrupted: "was cut short by a second stop request"
        }
    }

    /// The first hook that failed in a walk, and how.
    private final class FirstFailure: Sendable {
        private let failure = Mutex<(step: String, reason: String, errno: Int32?)?>(nil)

        func record<Value>(_ step: String, _ outcome: HookOutcome<Value>, budget: String) -> Bool {
            guard let reason = ListenerGroup.reason(outcome, budget: budget) else { return true }
            var code: Int32?
            if case .threw(let error) = outcome { code = (error as? any ErrnoRepresentable)?.errno }
            failure.withLock { $0 = $0 ?? (step, reason, code) }
            return false
        }

        var value: (step: String, reason: String, errno: Int32?)? { failure.withLock { $0 } }
    }

    /// Runs start-up commands and starts listeners; returns the started listeners.
    private func start(startedAt: Duration) async throws -> [any Listener] {
        let context = self.context
        let extend = configuration.extendTimeoutAfter
        let failure = FirstFailure()
        let commands = self.commands
        let commandBudget = configuration.budgets.start
        let core = self.core
        let logger = configuration.logger
        // Start-up commands, then listeners, alike: none once termination is requested, and the
        // first failure stops the walk and is what start-up reports. A stop request cuts the
        // hook running short (it is cancelled, and waited for within its budget: one that
        // ignores the cancellation finishes what it began): the daemon stops then, its start not
        // failed; the listeners started so far, that one included, stop.
        func startEach<Step: Sendable>(
            _ steps: [Step],
            name: @escaping @Sendable (Step) -> String,
            budget: @escaping @Sendable (Step) -> Duration,
            _ start: @escaping @Sendable (Step) async throws -> Void
        ) async -> Int {
            await runHooks(
                .start,
                of: core.terminationRequested ? [] : steps,
                name: name,
                budget: budget,
                extendAfter: extend,
                interruptible: true,
                interruptedKeepsItsBudget: true,
                settlesReturns: true,
                start
            ) { step, outcome in
                if case .interrupted = outcome {
                    logger.notice(
                        "Start-up of '\(name(step))' cut short: a stop was requested before it finished",
                        metadata: ["VIGIL_LISTENER": "\(name(step))", "VIGIL_EVENT": "start"]
                    )
                    return false
                }
                return failure.record(name(step), outcome, budget: "start") && !core.terminationRequested
            }
        }
        let ran = await startEach(commands, name: { $0.name }, budget: { _ in commandBudget }) { command in
            try await command.run(context: context)
        }
        if let failed = failure.value { try await failStart(failed, started: []) }
        guard ran == commands.count, !core.terminationRequested else { return [] }
        let started = await startEach(listeners, name: \.name, budget: budget(\.start)) { listener in
            try await listener.start(context: context)
        }
        if let failed = failure.value {
            try await failStart(failed, started: Array(listeners[..<(started - 1)]))
        }
        guard started == listeners.count, !core.terminationRequested else { return Array(listeners[..<started]) }
        core.hasStarted.store(true, ordering: .releasing)
        core.send(phase: "Running (generation \(core.generation))") { [$0, .ready] }
        metrics.started(generation: core.generation)
        core.observe(.started(generation: core.generation, timeToReady: configuration.clock.now - startedAt))
        return listeners
    }

    private func failStart(
        _ failure: (step: String, reason: String, errno: Int32?),
        started: [any Listener]
    ) async throws -> Never {
        core.beginStopping()
        let context = self.context
        let why = TerminationReason.requested("start-up failed in \(failure.step)")
        await runHooks(
            .terminate,
            of: started.reversed(),
            name: \.name,
            budget: terminateBudget(),
            interruptible: true,
            settlesReturns: true
        ) { listener in
            try await listener.terminate(reason: why, context: context)
        } settle: { [self] listener, outcome in
            core.terminateHookSettled()
            report(outcome, listener: listener.name, event: "terminate", budget: "terminate")
            return true
        }
        core.send(phase: "Failed to start: \(failure.step) \(failure.reason)", alone: true) { status in
            [status] + (failure.errno.map { [.errno($0)] } ?? [])
        }
        metrics.startFailed(failure.step)
        core.observe(.startFailed(listener: failure.step, reason: failure.reason))
        core.finish()
        throw ListenerGroupError(
            .startFailed,
            sentence("Start-up failed: '\(failure.step)' \(failure.reason)"),
            listener: failure.step
        )
    }

    @discardableResult
    private func report<Value>(
        _ outcome: HookOutcome<Value>,
        listener: String,
        event: @autoclosure () -> String,
        budget: String
    ) -> String? {
        guard let reason = Self.reason(outcome, budget: budget) else { return nil }
        let event = event()
        configuration.logger.error(
            "Listener '\(listener)' failed during \(event): \(reason)",
            metadata: ["VIGIL_LISTENER": "\(listener)", "VIGIL_EVENT": "\(event)"]
        )
        core.observe(.listenerFailed(listener: listener, event: event, reason: reason))
        return reason
    }

    private func reload() async {
        let began = configuration.clock.now
        let current = core.generation
        core.send(phase: "Reloading…") { [.reloading(monotonicMicroseconds: MonotonicClock.microseconds()), $0] }
        let transaction = ReloadTransaction(generation: current + 1)
        let context = self.context
        let prepared = await runHooks(
            .prepareReload,
            of: listeners,
            name: \.name,
            budget: budget(\.reload),
            settlesReturns: true
        ) {
            listener in
            try await listener.prepareReload(transaction, context: context)
        } settle: { listener, outcome in
            let rejection: String? =
                switch outcome {
                case .returned(.accept): nil
                case .returned(.reject(let reason)): reason
                default: Self.reason(outcome, budget: "reload")
                }
            guard let rejection else { return true }
            transaction.rejection = .init(listener: listener.name, reason: rejection)
            return false
        }
        if let rejection = transaction.rejection {
            await runHooks(
                .abortReload,
                of: Array(listeners[..<prepared].reversed()),
                name: \.name,
                budget: budget(\.reload)
            ) { listener in
                await listener.abortReload(transaction, context: context)
            } settle: { [self] listener, outcome in
                report(outcome, listener: listener.name, event: "reload abort", budget: "reload")
                return true
            }
            // The rejection stays in the line until the next reload: the daemon's own reports
            // after it must not hide that the configuration on disk is not the one in force.
            let reason = ListenerContext.keptForStatus("\(rejection)")
            core.send(phase: "Running (generation \(current)); reload rejected: \(reason)") { [$0, .ready] }
            metrics.reloaded(applied: false, generation: current)
            core.observe(.reloadRejected(rejection, generation: current, duration: configuration.clock.now - began))
            return
        }
        await runHooks(.commitReload, of: listeners, name: \.name, budget: budget(\.reload)) { listener in
            try await listener.commitReload(transaction, context: context)
        } settle: { [self] listener, outcome in
            report(outcome, listener: listener.name, event: "reload commit", budget: "reload")
            return true
        }
        core.commitGeneration(transaction.generation)
        core.send(phase: "Running (generation \(transaction.generation))", event: "reload applied") { [$0, .ready] }
        metrics.reloaded(applied: true, generation: transaction.generation)
        core.observe(.reloadApplied(generation: transaction.generation, duration: configuration.clock.now - began))
    }

    private func deliver(_ signal: ProcessSignal) async {
        let context = self.context
        await runHooks(.userSignal, of: listeners, name: \.name, budget: budget(\.userSignal)) { listener in
            try await listener.userSignal(signal, context: context)
        } settle: { [self] listener, outcome in
            report(outcome, listener: listener.name, event: "user signal \(signal)", budget: "user-signal")
            return true
        }
        core.observe(.userSignal(signal))
    }

    private func relieveMemoryPressure() async {
        let context = self.context
        let skipped = pressure.withLock { pressure in
            defer { pressure.skipped = 0 }
            return pressure.skipped
        }
        await runHooks(.memoryPressure, of: listeners, name: \.name, budget: budget(\.memoryPressure)) { listener in
            try await listener.memoryPressure(context: context)
        } settle: { [self] listener, outcome in
            report(outcome, listener: listener.name, event: "memory pressure", budget: "memory-pressure")
            return true
        }
        core.observe(.memoryPressure(skipped: skipped))
    }

    private func answerProbes() async {
        let context = self.context
        let failures = Failures()
        await runHooks(.health, of: listeners, name: \.name, budget: budget(\.health)) { listener in
            try await listener.checkHealth(context: context)
        } settle: { [configuration] listener, outcome in
            guard let reason = Self.reason(outcome, budget: "health") else { return true }
            failures.append(listener.name, reason)
            configuration.logger.warning(
                "Listener '\(listener.name)' failed its health check: \(reason)",
                metadata: ["VIGIL_LISTENER": "\(listener.name)"]
            )
            return true
        }
        let healthy = failures.values.isEmpty
        for probe in core.takeProbes() { probe(healthy) }
    }

    private func terminate(
        _ reason: TerminationReason,
        listeners started: [any Listener],
        startedAt: Duration
    ) async -> [(listener: String, reason: String)] {
        core.send(phase: "Stopping (\(reason))…") { [.stopping, $0] }
        // Usually the last notification: when the exit will need a barrier (notifications wait
        // in the process, or it is not the one the manager started), it is sent now and
        // confirmed while the listeners stop (a later notification makes the exit send a new one).
        core.notifier.prepareToSynchronize()
        core.observe(.stopping(reason))
        let context = self.context
        let order = Array(started.reversed())
        let failures = Failures()
        let core = self.core
        // Two requests before the stop began (they waited for a reload, say): the first listener
        // to stop is still asked, and cut short at once, so that a part it runs hears it. Every
        // listener is asked to stop, a second request or not: skipping the ones after the hook it
        // cut short would skip the state store's final checkpoint, and lose what it holds.
        await runHooks(
            .terminate,
            of: order,
            name: \.name,
            budget: terminateBudget(),
            extendAfter: configuration.extendTimeoutAfter,
            interruptible: true,
            settlesReturns: true
        ) { listener in
            try await listener.terminate(reason: reason, context: context)
        } settle: { [self] listener, outcome in
            core.terminateHookSettled()
            if let failure = report(outcome, listener: listener.name, event: "terminate", budget: "terminate") {
                failures.append(listener.name, failure)
            }
            return true
        }
        let all = failures.values
        if let first = all.first {
            core.send(phase: "Stopped with errors: \(first.listener) \(first.reason)", alone: true)
        }
        core.observe(.stopped(uptime: configuration.clock.now - startedAt))
        core.finish()
        return all
    }

    /// Failures collected over a walk, in order.
    private final class Failures: Sendable {
        private let list = Mutex<[(listener: String, reason: String)]>([])
        func append(_ listener: String, _ reason: String) { list.withLock { $0.append((listener, reason)) } }
        var values: [(listener: String, reason: String)] { list.withLock { $0 } }
    }
}

/// An error that carries an errno-style code for the service manager's `ERRNO=`.
package protocol ErrnoRepresentable: Error {
    /// The errno value, e.g. `ENOENT`.
    var errno: Int32 { get }
}
