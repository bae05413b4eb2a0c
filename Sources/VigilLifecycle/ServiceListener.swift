import Logging
import ServiceLifecycle
import Synchronization

/// Runs a long-running part — a swift-service-lifecycle `Service` such as Hummingbird's
/// `Application`, or a closure — as a listener whose start completes when the part says it is
/// ready, so `READY=1` follows the bind.
///
/// ```swift
/// let http = ServiceListener(name: "http", dependencies: ["configuration"]) { ready in
///     Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 8080)),
///                 onServerRunning: { _ in ready() })
/// }
/// let worker = ServiceListener(name: "queue", run: { ready in
///     let queue = try await Queue.connect()
///     ready()
///     try await cancelWhenGracefulShutdown {  // swift-service-lifecycle
///         for try await message in queue.messages { try await handle(message) }
///     }
/// })
/// ```
///
/// What it guarantees:
/// - **Start waits for readiness.** ``Listener/start(context:)`` starts the part and returns
///   when the part calls its ``ReadySignal``. A part that throws (or returns) before it is ready
///   fails the start: the daemon exits non-zero with the start-failed `MESSAGE_ID` and
///   `STATUS=Failed to start: <name> <reason>`. So does a part that is not ready within the
///   listener's start budget (it is cancelled).
/// - **Graceful stop, then cancellation.** At stop the part gets swift-service-lifecycle's
///   graceful shutdown (`gracefulShutdown()`, `withGracefulShutdownHandler`,
///   `cancelWhenGracefulShutdown` all work inside it) and may finish what is in flight. When it
///   has not ended shortly before the listener's terminate budget runs out (at the budget minus
///   a tenth of it, at most one second before), it is cancelled, and the stop counts as failed
///   (exit status 1): in-flight work was cut short. `terminate` returns only after the part has
///   ended, so the lifecycle's "Stopped" entry follows the end of every part.
/// - **Reloads reach the part.** `prepareReload` and `commitReload` closures (both optional)
///   are its reload hooks: a part that applies a new setting at once (a pool's size, a limit)
///   does it in `commitReload`, which runs after the listeners it depends on (the configuration)
///   committed; no second listener is needed.
/// - **Memory pressure and shutdown history reach it too.** A `memoryPressure` closure runs
///   when the daemon hears memory pressure (``Listener/memoryPressure(context:)``: drop a cache,
///   shrink a pool); a `shutdownHistory` (a `ShutdownMarker` the part begins at start and ends
///   after its last write) makes `status` report whether the previous run stopped cleanly
///   (`previousShutdownClean`), as `PersistenceListener` does for its state file.
/// - **A second stop request cuts the drain short.** When the daemon hears a second stop request
///   (a second `SIGTERM`) while the part drains, its deadline moves to that instant (the
///   ``ReadySignal/onStop(_:)`` handlers hear it again) and the part is cancelled at once; the
///   daemon waits at most a second for it to end (to kill the jobs it started, say) before it
///   goes on (the listeners after it still stop, each within a second) and exits with status 1.
/// - **The part knows its deadline.** At stop, before graceful shutdown, ``ReadySignal/onStop(_:)``
///   handlers get the instant by which the part should have drained (also
///   ``ReadySignal/stopDeadline``): a twentieth of the grace period (at most half a second) before
///   it would be cancelled, so that it has time to close what it holds and return;
///   hand it to `AcceptedConnections.stop(deadline:)` (VigilSystemd) or a drain of its own.
/// - **A part that ends by itself is a fault.** A part that returns or throws while the daemon
///   runs is reported as a fatal fault (`WATCHDOG=trigger`, the fatal-fault `MESSAGE_ID`,
///   `STATUS=` with the reason) and the daemon stops with exit status 1, so that
///   `Restart=on-failure` brings it back. A daemon whose part may finish on purpose lets it wait
///   for graceful shutdown instead of returning.
///
/// The part runs in a `ServiceGroup` of its own that owns no signals (the daemon's mediator owns
/// them), in a task that lives from `start` to `terminate`.
public final class ServiceListener: Listener {
    /// The listener's name, in logs, errors and other listeners' dependencies.
    public let name: String
    /// The listeners that start before this one and stop after it.
    public let dependencies: [String]
    /// Its budgets, or `nil` for the group's: `start` bounds the wait for readiness,
    /// `terminate` the graceful shutdown.
    public let budgets: ListenerBudgets?
    /// Whether the previous run stopped cleanly, as the part's data knows it (a `ShutdownMarker`
    /// the part begins and ends): reported in `status.json`'s `previousShutdownClean`; `nil` for
    /// none.
    public let shutdownHistory: (any ShutdownHistory)?

    private struct Running: Sendable {
        let group: ServiceGroup
        let task: Task<Void, Never>
        let ready: ReadySignal
    }

    /// Where the part is, in one enum: each case holds what only that stage needs.
    private enum State {
        /// `start` not called yet.
        case initial
        /// `start` runs the part; not ready yet (or ready, and `start` not yet told).
        case starting
        /// The part runs.
        case running(Running)
        /// The part ended while the daemon was running, for this reason (`running` is `nil`
        /// while `start` has not recorded it yet).
        case endedEarly(Running?, reason: String)
        /// `terminate` began: the part's end is expected; `error` is what it threw when it ended.
        case stopping(Running?, error: (any Error)?)
    }

    /// Builds the part at start.
    private let makeService: @Sendable (ReadySignal) async throws -> any Service
    private let state = Mutex(State.initial)
    private let prepare: PrepareReload?
    private let commit: CommitReload?
    private let relieve: MemoryPressure?
    private let signalled: UserSignal?

    /// Checks a proposed reload (``Listener/prepareReload(_:context:)``).
    package typealias PrepareReload =
        @Sendable (ReloadTransaction, ListenerContext) async throws -> ReloadDecision
    /// Applies a committed reload (``Listener/commitReload(_:context:)``): the listeners this
    /// one depends on have committed, so `context.values` holds the new values (the new
    /// configuration, from `ConfigurationListener`).
    package typealias CommitReload = @Sendable (ReloadTransaction, ListenerContext) async throws -> Void
    /// Frees memory when the daemon hears memory pressure (``Listener/memoryPressure(context:)``),
    /// within the listener's memory-pressure budget.
    package typealias MemoryPressure = @Sendable (ListenerContext) async throws -> Void
    /// Answers `SIGUSR1` or `SIGUSR2` (``Listener/userSignal(_:context:)``) within the listener's
    /// user-signal budget: run a job now, report, rotate.
    package typealias UserSignal = @Sendable (ProcessSignal, ListenerContext) async throws -> Void

    /// A listener that runs the `Service` that `makeService` builds.
    ///
    /// - Parameters:
    ///   - name: the listener's name, in logs, errors and other listeners' dependencies.
    ///   - dependencies: the listeners that start before this one (and stop after it).
    ///   - budgets: its budgets; the start budget bounds the wait for readiness, the terminate
    ///     budget the graceful shutdown.
    ///   - prepareReload: checks a proposed reload; `nil` accepts every one.
    ///   - commitReload: applies a committed reload to the running part (the part reads the new
    ///     values from `context.values`, or gets them from this closure); `nil` for a part that
    ///     reads what it needs from `context.values` when it needs it.
    ///   - memoryPressure: runs on memory pressure (drop a cache); `nil` for nothing.
    ///   - userSignal: runs on `SIGUSR1` or `SIGUSR2` (after the listeners it depends on heard
    ///     it); `nil` for nothing.
    ///   - shutdownHistory: what knows whether the previous run stopped cleanly (a
    ///     `ShutdownMarker`), for `status`; `nil` for none.
    ///   - makeService: builds the service at start and wires its readiness callback to the
    ///     ``ReadySignal`` (Hummingbird: `onServerRunning: { _ in ready() }`).
    public init<Part: Service>(
        name: String,
        dependencies: [String] = [],
        budgets: ListenerBudgets? = nil,
        prepareReload: (@Sendable (ReloadTransaction, ListenerContext) async throws -> ReloadDecision)? = nil,
        commitReload: (@Sendable (ReloadTransaction, ListenerContext) async throws -> Void)? = nil,
        memoryPressure: (@Sendable (ListenerContext) async throws -> Void)? = nil,
        userSignal: (@Sendable (ProcessSignal, ListenerContext) async throws -> Void)? = nil,
        shutdownHistory: (any ShutdownHistory)? = nil,
        service makeService: @escaping @Sendable (ReadySignal) async throws -> Part
    ) {
        self.name = name
        self.dependencies = dependencies
        self.budgets = budgets
        self.prepare = prepareReload
        self.commit = commitReload
        self.relieve = memoryPressure
        self.signalled = userSignal
        self.shutdownHistory = shutdownHistory
        self.makeService = { ready in try await makeService(ready) }
    }

    /// A listener that runs `run` until the daemon stops.
    ///
    /// - Parameters:
    ///   - name: the listener's name, in logs, errors and other listeners' dependencies.
    ///   - dependencies: the listeners that start before this one (and stop after it).
    ///   - budgets: its budgets; the start budget bounds the wait for readiness, the terminate
    ///     budget the graceful shutdown.
    ///   - prepareReload: checks a proposed reload; `nil` accepts every one.
    ///   - commitReload: applies a committed reload to the running part; `nil` for none.
    ///   - memoryPressure: runs on memory pressure (drop a cache); `nil` for nothing.
    ///   - userSignal: runs on `SIGUSR1` or `SIGUSR2` (after the listeners it depends on heard
    ///     it); `nil` for nothing.
    ///   - shutdownHistory: what knows whether the previous run stopped cleanly (a
    ///     `ShutdownMarker`), for `status`; `nil` for none.
    ///   - run: the part: it calls its ``ReadySignal`` once ready, then works until graceful
    ///     shutdown (swift-service-lifecycle's `gracefulShutdown()`) or cancellation.
    public convenience init(
        name: String,
        dependencies: [String] = [],
        budgets: ListenerBudgets? = nil,
        prepareReload: (@Sendable (ReloadTransaction, ListenerContext) async throws -> ReloadDecision)? = nil,
        commitReload: (@Sendable (ReloadTransaction, ListenerContext) async throws -> Void)? = nil,
        memoryPressure: (@Sendable (ListenerContext) async throws -> Void)? = nil,
        userSignal: (@Sendable (ProcessSignal, ListenerContext) async throws -> Void)? = nil,
        shutdownHistory: (any ShutdownHistory)? = nil,
        run: @escaping @Sendable (ReadySignal) async throws -> Void
    ) {
        self.init(
            name: name,
            dependencies: dependencies,
            budgets: budgets,
            prepareReload: prepareReload,
            commitReload: commitReload,
            memoryPressure: memoryPressure,
            userSignal: userSignal,
            shutdownHistory: shutdownHistory,
            service: { ready in ClosureService { try await run(ready) } }
        )
    }

    public func start(context: ListenerContext) async throws {
        let ready = ReadySignal(context: context)
        state.withLock { $0 = .starting }
        let service = try await makeService(ready)
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(
                        service: service,
                        successTerminationBehavior: .ignore,
                        failureTerminationBehavior: .cancelGroup
                    )
                ],
                logger: context.logger
            )
        )
        // The part outlives this hook: it runs until terminate() shuts it down or it ends by
        // itself, so it needs a task of its own; terminate() awaits it.
        let task = Task { [self] in
            var failure: (any Error)?
            do {
                try await group.run()
            } catch {
                failure = error
            }
            partEnded(failure, ready: ready, context: context)
        }
        let running = Running(group: group, task: task, ready: ready)
        state.withLock { state in
            switch state {
            case .endedEarly(nil, let reason): state = .endedEarly(running, reason: reason)
            case .stopping(nil, let error): state = .stopping(running, error: error)
            case .initial, .starting, .running, .endedEarly, .stopping: state = .running(running)
            }
        }
        switch await ready.wait() {
        case .ready:
            return
        case .ended(let error):
            await task.value
            if let error { throw error }
            throw ListenerGroupError(
                .startFailed,
                "ended before it was ready (it returned without calling ready())",
                listener: name
            )
        case .cancelled:
            // The start budget ran out: the mediator abandons this hook; do not leave the part behind.
            task.cancel()
            throw CancellationError()
        }
    }

    /// The task the part runs in, once it runs: it ends after this listener has heard the
    /// part's end (tests await it).
    var partTask: Task<Void, Never>? {
        state.withLock { state in
            switch state {
            case .running(let running), .endedEarly(let running?, _), .stopping(let running?, _): running.task
            case .initial, .starting, .endedEarly(nil, _), .stopping(nil, _): nil
            }
        }
    }

    private func partEnded(_ error: (any Error)?, ready: ReadySignal, context: ListenerContext) {
        ready.settle(.ended(error))
        let fault = state.withLock { state -> String? in
            switch state {
            case .stopping(let running, _):
                state = .stopping(running, error: error)
                return nil
            case .initial, .endedEarly:
                return nil
            case .starting, .running:
                guard ready.isReady else { return nil }  // start() reports it
                if context.core.terminationRequested {
                    // The daemon stops: a part may end before its own terminate (its input closed
                    // by a listener that stopped first). That is no fault; what it threw, if
                    // anything, is reported by terminate as the stop's.
                    if case .running(let running) = state {
                        state = .stopping(running, error: error)
                    } else {
                        state = .stopping(nil, error: error)
                    }
                    return nil
                }
                let reason =
                    error.map { "ended while the daemon was running: \($0)" } ?? "ended while the daemon was running"
                if case .running(let running) = state {
                    state = .endedEarly(running, reason: reason)
                } else {
                    state = .endedEarly(nil, reason: reason)
                }
                return reason
            }
        }
        if let fault {
            context.reportFatalFault(fault, listener: name)
            context.requestTermination("'\(name)' \(fault)")
        }
    }

    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        try await prepare?(reload, context) ?? .accept
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        try await commit?(reload, context)
    }

    public func memoryPressure(context: ListenerContext) async throws {
        try await relieve?(context)
    }

    public func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        try await signalled?(signal, context)
    }

    public func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        let (running, endedEarly) = state.withLock { state -> (Running?, String?) in
            switch state {
            case .initial, .starting:
                state = .stopping(nil, error: nil)
                return (nil, nil)
            case .running(let running):
                state = .stopping(running, error: nil)
                return (running, nil)
            case .endedEarly(let running, let reason):
                return (running, reason)
            case .stopping(let running, _):
                return (running, nil)
            }
        }
        guard let running else { return }
        let budget = context.budgets(for: name).terminate
        let grace = budget - min(budget / 10, .seconds(1))
        // The part hears its deadline first (onStop), then swift-service-lifecycle's shutdown. The
        // deadline is a little before the cancellation (a twentieth of the grace, at most half a
        // second), so a part that drains until it still has time to close and return.
        let drainBy = grace - min(grace / 20, .milliseconds(500))
        running.ready.beginStop(deadline: ContinuousClock.now.advanced(by: drainBy))
        await running.group.triggerGracefulShutdown()
        let ended = await withTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                await running.task.value
                return true
            }
            tasks.addTask {
                try? await context.clock.sleep(for: grace)
                return false
            }
            let ended = await tasks.next() ?? false
            // Cancelled at the grace period, or because this hook was cut short (a second stop
            // request): either way the part is cancelled and awaited (the other child ends with
            // it); cut short, it first hears that its deadline is now.
            if !ended {
                if Task.isCancelled { running.ready.hurry(now: .now) }
                running.task.cancel()
            }
            tasks.cancelAll()
            return ended
        }
        let stopError = state.withLock { state -> (any Error)? in
            if case .stopping(_, let error) = state { return error }
            return nil
        }
        if let endedEarly { throw ListenerGroupError(.stopFailed, endedEarly, listener: name) }
        guard ended else {
            throw ListenerGroupError(
                .stopFailed,
                "did not shut down gracefully within \(grace.formatted) (its terminate budget is \(budget.formatted)); it was cancelled",
                listener: name
            )
        }
        if let stopError, !(stopError is CancellationError) { throw stopError }
    }
}
