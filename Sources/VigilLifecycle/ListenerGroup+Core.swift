import Logging
import Synchronization
import VigilEventLoop

extension ListenerGroup {
    /// The mediator's shared core (``ListenerGroup`` is the mediator; this is what its loop,
    /// its signal handlers and its listeners share): its one ``State``, the doorbell that wakes the event loop, and
    /// the outlets (service manager, observers). Events may be requested from any thread (signal
    /// handlers, listeners, the watchdog); the loop in ``ListenerGroup`` takes them one at a time.
    final class Core: Sendable {
        /// What the mediator holds while it starts or runs: the requests waiting for the loop,
        /// the configuration generation and the last health probe's id.
        struct Active {
            /// Start-up has not run yet (it is the first event, unless a stop request came first).
            var start = true
            /// Reload requested; any number of requests while one is pending collapse into it.
            var reload = false
            /// User signals requested, each at most once while pending (standard signals coalesce).
            var userSignals: [ProcessSignal] = []
            /// Memory pressure reported; any number of reports while one is pending collapse into it.
            var memoryPressure = false
            /// Health probes waiting for an answer, by id.
            var probes: [Int: @Sendable (Bool) -> Void] = [:]
            /// The id of the last probe.
            var lastProbe = 0
            /// The kind of event the loop took last (see ``Core/nextEvent()``): the pending kinds
            /// take turns after it. Memory pressure at first, so that health probes come first.
            var lastServed = Kind.memoryPressure
            /// The configuration generation: 1 at start, +1 per applied reload.
            var generation = 1
            /// What a stop request cuts short while start-up runs (the start hook running).
            var startInterruption: (@Sendable () -> Void)?
        }

        /// The kinds of request that wait in ``Active`` and take turns, in this order.
        enum Kind: Int, CaseIterable {
            case healthProbe, reload, userSignal, memoryPressure
        }

        /// A stop request the loop has not taken yet.
        struct StopRequest {
            var reason: TerminationReason
            /// A second stop request came.
            var urgent = false

            /// How the stop begins: a second request that came before it cuts the first
            /// listener to stop short as it pauses.
            var urgency: Urgency { urgent ? .cutNext : .none(firstHook: true) }
        }

        /// What further stop requests did to a stop under way.
        enum Urgency: Equatable {
            /// None came; `firstHook`: no `terminate` hook has settled yet.
            case none(firstHook: Bool)
            /// One came before the first listener to stop paused (two requests while a reload
            /// ran, say): that listener's hook is cut short as soon as it pauses, so that a part
            /// it runs hears it; if it returns without pausing, nothing is cut.
            case cutNext
            /// One cut a hook short, or came once a hook had settled: every hook after it still
            /// runs (the state store's final checkpoint among them) within `interruptionGrace`,
            /// and no further request cuts one short.
            case hurried
        }

        /// The mediator's state, in the manner of swift-service-lifecycle's `ServiceGroup`: one
        /// enum, each case holding what only that stage needs.
        enum State {
            /// Built, ``ListenerGroup/run()`` not called: requests wait as they would while
            /// running; a stop request waits in `stop` (the run then stops before starting).
            case initial(Active, stop: StopRequest?)
            /// Starting or running: requests wait in `Active` until the loop takes them.
            case active(Active)
            /// A stop was requested; the loop takes it after the event at hand.
            case stopRequested(StopRequest, generation: Int)
            /// Listeners are stopping (`STOPPING=1` was sent, or start-up failed). `interruption`
            /// is what a further stop request cuts short (the hook running).
            case stopping(urgency: Urgency, interruption: (@Sendable () -> Void)?, generation: Int)
            /// Every listener stopped; the loop returned or is returning.
            case stopped(generation: Int)
        }

        let notifier: any ServiceManagerNotifier
        let observers: [any LifecycleObserver]
        /// Abandoned hooks that still run.
        let abandoned = AbandonedHooks()
        /// Every listener started (set just before `READY=1`).
        let hasStarted = Atomic(false)
        let logger: Logger
        let clock: LoopClock
        private let state = Mutex(State.initial(Active(), stop: nil))
        let doorbell: AsyncStream<Void>
        private let bell: AsyncStream<Void>.Continuation

        init(
            notifier: any ServiceManagerNotifier,
            observers: [any LifecycleObserver],
            logger: Logger,
            clock: LoopClock = .monotonic
        ) {
            self.clock = clock
            self.notifier = notifier
            self.observers = observers
            self.logger = logger
            (doorbell, bell) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        }

        // MARK: outlets

        func send(_ messages: [NotifyMessage]) {
            do {
                try notifier.notify(messages)
            } catch {
                logger.error(
                    "Could not notify the service manager: \(error). It may consider the daemon hung.",
                    metadata: ["VIGIL_NOTIFY": "\(messages.map(\.description).joined(separator: ", "))"]
                )
            }
        }

        /// What `STATUS=` says, in two parts joined by "; ": the lifecycle's phase (`Running
        /// (generation 2)`, `Stopping (SIGTERM)…`) and the daemon's own line
        /// (``ListenerContext/reportStatus(_:)``), so that neither erases the other.
        private struct StatusLine {
            var phase: String?
            var own: String?

            /// The parts that are there, joined by "; " (built in place: a reload's line is built
            /// between `RELOADING=1` and `READY=1`).
            static func joined(_ first: String?, _ second: String?, _ third: String? = nil) -> String {
                var text = first ?? ""
                func append(_ part: String?) {
                    guard let part, !part.isEmpty else { return }
                    text += text.isEmpty ? part : "; " + part
                }
                append(second)
                append(third)
                return text
            }
        }
        /// Held while a `STATUS=` is composed and sent: two sends from two threads (a listener's
        /// report, the loop's `READY=1`) reach the service manager in the order they were composed.
        private let statusLine = Mutex(StatusLine())

        /// Sends the datagram `compose` builds around a `STATUS=` that says `phase`, then `event`
        /// (this datagram only: "reload applied"), then the daemon's own line unless `alone` (an
        /// error that is the whole line: a failed start, a fatal fault, a stop with errors). The
        /// phase stays: the daemon's next line follows it.
        func send(
            phase: String,
            event: String? = nil,
            alone: Bool = false,
            _ compose: (NotifyMessage) -> [NotifyMessage] = { [$0] }
        ) {
            statusLine.withLock { line in
                line.phase = phase
                send(compose(.status(StatusLine.joined(phase, event, alone ? nil : line.own))))
            }
        }

        /// Sets the daemon's own line and sends it after the lifecycle's phase: `Running
        /// (generation 2); 41 heartbeats`.
        func sendOwnStatus(_ text: String) {
            statusLine.withLock { line in
                line.own = text
                send([.status(StatusLine.joined(line.phase, text))])
            }
        }

        func observe(_ kind: LifecycleRecord.Kind) {
            let record = LifecycleRecord(kind)
            for observer in observers { observer.observe(record) }
        }

        // MARK: state

        /// Changes the waiting requests in place, when the mediator is built or running: the
        /// state is moved out for the change (so that `Active`'s collections are not copied) and
        /// back. `nil` once a stop was requested.
        private static func modifyActive<Result>(
            _ state: inout State,
            _ body: (inout Active) -> Result
        ) -> Result? {
            switch state {
            case .initial(var active, nil):
                state = .stopped(generation: 0)  // placeholder while `active` is changed
                defer { state = .initial(active, stop: nil) }
                return body(&active)
            case .active(var active):
                state = .stopped(generation: 0)  // placeholder while `active` is changed
                defer { state = .active(active) }
                return body(&active)
            case .initial, .stopRequested, .stopping, .stopped:
                return nil
            }
        }

        /// Whether `state` is past a stop request (one asked for before the run counts).
        private static func stopRequested(_ state: State) -> Bool {
            switch state {
            case .initial(_, let stop): stop != nil
            case .active: false
            case .stopRequested, .stopping, .stopped: true
            }
        }

        /// The run begins: `false` when the group already ran (or is running).
        func begin() -> Bool {
            state.withLock { state in
                guard case .initial(let active, let stop) = state else { return false }
                state = stop.map { .stopRequested($0, generation: active.generation) } ?? .active(active)
                return true
            }
        }

        // MARK: requests (any thread)

        var generation: Int {
            state.withLock { state in
                switch state {
                case .initial(let active, _), .active(let active): active.generation
                case .stopRequested(_, let generation), .stopping(_, _, let generation), .stopped(let generation):
                    generation
                }
            }
        }

        func commitGeneration(_ generation: Int) {
            state.withLock { state in
                switch state {
                case .initial, .active: _ = Self.modifyActive(&state) { $0.generation = generation }
                case .stopRequested(let stop, _): state = .stopRequested(stop, generation: generation)
                case .stopping(let urgency, let cut, _):
                    state = .stopping(urgency: urgency, interruption: cut, generation: generation)
                case .stopped: state = .stopped(generation: generation)
                }
            }
        }

        /// Asks the loop for `event`: a signal's, a listener's or the daemon's request. Reloads
        /// and user signals are dropped once a stop was requested; a further stop request cuts the
        /// running hook short (or the next one as it begins), and the hooks after it run within
        /// `interruptionGrace` each.
        func request(_ event: LifecycleEvent) {
            var interruption: (@Sendable () -> Void)?
            var unanswered: [@Sendable (Bool) -> Void] = []
            let ring = state.withLock { state -> Bool in
                switch (event.wrapped, state) {
                case (.terminate(let reason), .initial(var active, nil)):
                    // A stopping daemon is not healthy: waiting probes hear so now.
                    unanswered = Array(active.probes.values)
                    active.probes.removeAll()
                    state = .initial(active, stop: StopRequest(reason: reason))
                    return true
                case (.terminate(let reason), _) where !reason.isFromOutside && Self.stopRequested(state):
                    // A stop the daemon's own code asks for while it stops already (a listener's
                    // terminate, a part that ends then) is the stop under way: only a further
                    // request from outside (an admin's second SIGTERM, Ctrl-C twice, the daemon's
                    // task cancelled) hurries it.
                    return false
                case (.terminate, .initial(let active, var stop?)):
                    stop.urgent = true
                    state = .initial(active, stop: stop)
                    return true
                case (.terminate(let reason), .active(let active)):
                    state = .stopRequested(StopRequest(reason: reason), generation: active.generation)
                    unanswered = Array(active.probes.values)
                    // A start hook that waits (for a database, say) is cut short: `systemctl
                    // stop` during start-up stops the daemon now, not once the start budget ran out.
                    interruption = active.startInterruption
                    return true
                case (.terminate, .stopRequested(var stop, let generation)):
                    stop.urgent = true
                    state = .stopRequested(stop, generation: generation)
                    return true
                case (.terminate, .stopping(let urgency, let cut, let generation)):
                    // The first further request cuts the hook paused now short (or, before the
                    // first listener to stop paused, that one as it pauses); the hooks after it
                    // are held to the grace, and no later request cuts them.
                    guard case .none(let firstHook) = urgency else { return true }
                    interruption = cut
                    let next: Urgency = cut == nil && firstHook ? .cutNext : .hurried
                    state = .stopping(urgency: next, interruption: cut, generation: generation)
                    return true
                case (.reload, _):
                    return Self.modifyActive(&state) { $0.reload = true } != nil
                case (.userSignal(let signal), _):
                    return Self.modifyActive(&state) { active in
                        if !active.userSignals.contains(signal) { active.userSignals.append(signal) }
                    } != nil
                case (.memoryPressure, _):
                    return Self.modifyActive(&state) { $0.memoryPressure = true } != nil
                case (.terminate, .stopped), (.start, _), (.healthProbe, _):
                    // Start is the loop's first event, not a request; probes come with an answer.
                    return false
                }
            }
            interruption?()
            for probe in unanswered { probe(false) }
            if ring { bell.yield() }
        }

        /// Asks the loop to answer a health probe; `answer` is called once, with `false` if the
        /// daemon is stopping.
        func requestProbe(_ answer: @escaping @Sendable (Bool) -> Void) -> Int? {
            let id = state.withLock { state -> Int? in
                Self.modifyActive(&state) { active in
                    active.lastProbe += 1
                    active.probes[active.lastProbe] = answer
                    return active.lastProbe
                }
            }
            if id == nil { answer(false) } else { bell.yield() }
            return id
        }

        func cancelProbe(_ id: Int) {
            state.withLock { state in _ = Self.modifyActive(&state) { $0.probes[id] = nil } }
        }

        func takeProbes() -> [@Sendable (Bool) -> Void] {
            state.withLock { state in
                Self.modifyActive(&state) { active in
                    defer { active.probes.removeAll() }
                    return Array(active.probes.values)
                } ?? []
            }
        }

        /// `true` once a second stop request came.
        var isUrgent: Bool {
            state.withLock { state in
                switch state {
                case .initial(_, let stop): stop?.urgent ?? false
                case .stopRequested(let stop, _): stop.urgent
                case .stopping(let urgency, _, _): urgency == .cutNext || urgency == .hurried
                case .active, .stopped: false
                }
            }
        }

        /// `true` once listeners are stopping (or start-up failed), and after.
        var isStopping: Bool {
            state.withLock { state in
                switch state {
                case .stopping, .stopped: true
                case .initial, .active, .stopRequested: false
                }
            }
        }

        /// `true` once a stop was requested (or start-up failed).
        var terminationRequested: Bool { state.withLock { Self.stopRequested($0) } }

        /// Start-up failed: listeners stop without a stop request.
        func beginStopping() {
            let probes = state.withLock { state -> [@Sendable (Bool) -> Void] in
                switch state {
                case .initial(let active, _), .active(let active):
                    state = .stopping(urgency: .none(firstHook: true), interruption: nil, generation: active.generation)
                    return Array(active.probes.values)
                case .stopRequested(let stop, let generation):
                    state = .stopping(urgency: stop.urgency, interruption: nil, generation: generation)
                    return []
                case .stopping, .stopped:
                    return []
                }
            }
            for probe in probes { probe(false) }
        }

        /// A `terminate` hook settled: a request waiting to cut the first listener short
        /// (``Urgency/cutNext``) found it returned without pausing, so nothing is cut and the rest
        /// is hurried; without one, a later request no longer waits for a first hook.
        func terminateHookSettled() {
            state.withLock { state in
                guard case .stopping(let urgency, let cut, let generation) = state else { return }
                switch urgency {
                case .cutNext: state = .stopping(urgency: .hurried, interruption: cut, generation: generation)
                case .none(firstHook: true):
                    state = .stopping(urgency: .none(firstHook: false), interruption: cut, generation: generation)
                case .none(firstHook: false), .hurried: break
                }
            }
        }

        /// A `terminate` budget as the stop holds a hook to it: after a further stop request, at
        /// most `interruptionGrace`. Listeners read theirs so (``ListenerContext``), and the
        /// mediator watches it so.
        func terminateBudget(_ own: Duration) -> Duration {
            isUrgent ? min(own, Self.interruptionGrace) : own
        }

        /// Registers what a further stop request should cut short; runs it at once when such a
        /// request came before the first listener to stop paused (``Urgency/cutNext``).
        func setInterruption(_ interruption: (@Sendable () -> Void)?) {
            let now = state.withLock { state -> Bool in
                switch state {
                case .active:
                    // Start-up: a stop request cuts the start hook running.
                    _ = Self.modifyActive(&state) { $0.startInterruption = interruption }
                    return false
                case .stopRequested:
                    // The stop was requested while the start walk began: cut it now.
                    return interruption != nil
                case .initial, .stopping, .stopped:
                    break
                }
                guard case .stopping(let urgency, _, let generation) = state else { return false }
                let cutNow = urgency == .cutNext && interruption != nil
                state = .stopping(
                    urgency: cutNow ? .hurried : urgency,
                    interruption: interruption,
                    generation: generation
                )
                return cutNow
            }
            if now, let interruption { interruption() }
        }

        /// The next event to handle: stopping first, then start; then health probes, reloads, user
        /// signals and memory pressure take turns, each pending kind after the one taken last. A
        /// kind that is requested again while it is handled (a hook that asks for a reload every
        /// time, a flood of `SIGHUP`s) waits for the others' turn instead of holding the loop:
        /// with a fixed order a reload requested by every reload starved `SIGUSR1` for good.
        /// Taking a stop moves the state to ``State/stopping(urgency:interruption:generation:)``.
        func nextEvent() -> LifecycleEvent? {
            state.withLock { state -> LifecycleEvent? in
                if case .stopRequested(let stop, let generation) = state {
                    state = .stopping(urgency: stop.urgency, interruption: nil, generation: generation)
                    return .terminate(stop.reason)
                }
                guard case .active = state else { return nil }
                return Self.modifyActive(&state) { active -> LifecycleEvent? in
                    if active.start {
                        active.start = false
                        return .start
                    }
                    let kinds = Kind.allCases
                    for offset in 1...kinds.count {
                        let kind = kinds[(active.lastServed.rawValue + offset) % kinds.count]
                        guard let event = Self.take(kind, from: &active) else { continue }
                        active.lastServed = kind
                        return event
                    }
                    return nil
                } ?? nil
            }
        }

        /// Whether ``nextEvent()`` would return an event now (without taking it).
        var hasPendingEvent: Bool {
            state.withLock { state in
                switch state {
                case .stopRequested: true
                case .active(let active):
                    active.start || active.reload || active.memoryPressure || !active.probes.isEmpty
                        || !active.userSignals.isEmpty
                case .initial, .stopping, .stopped: false
                }
            }
        }

        /// The event of `kind` if one waits, taken from `active`.
        private static func take(_ kind: Kind, from active: inout Active) -> LifecycleEvent? {
            switch kind {
            case .healthProbe:
                return active.probes.isEmpty ? nil : .healthProbe
            case .reload:
                guard active.reload else { return nil }
                active.reload = false
                return .reload
            case .userSignal:
                return active.userSignals.isEmpty ? nil : .userSignal(active.userSignals.removeFirst())
            case .memoryPressure:
                guard active.memoryPressure else { return nil }
                active.memoryPressure = false
                return .memoryPressure
            }
        }

        /// Every listener stopped: answers waiting probes and ends the doorbell.
        func finish() {
            let probes = state.withLock { state -> [@Sendable (Bool) -> Void] in
                switch state {
                case .initial(let active, _), .active(let active):
                    state = .stopped(generation: active.generation)
                    return Array(active.probes.values)
                case .stopRequested(_, let generation), .stopping(_, _, let generation), .stopped(let generation):
                    state = .stopped(generation: generation)
                    return []
                }
            }
            for probe in probes { probe(false) }
            bell.finish()
        }
    }
}
