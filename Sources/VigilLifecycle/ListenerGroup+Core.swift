import Logging
import Synchronization

extension ListenerGroup {
    /// The mediator's shared core (``ListenerGroup`` is the mediator; this is what its loop,
    /// its signal handlers and its listeners share): its one ``State``, the doorbell that wakes the event loop, and
    /// the outlets (service manager, observers). Events may be requested from any thread (signal
    /// handlers, listeners, the watchdog); the loop in ``ListenerGroup`` takes them one at a time.
    final class Core: Sendable {
        /// What waits for the loop while the daemon starts or runs.
        struct Pending {
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
        }

        /// The mediator's state, in the manner of swift-service-lifecycle's `ServiceGroup`: one
        /// enum, each case holding what only that stage needs.
        enum State {
            /// Starting or running: requests wait in `Pending` until the loop takes them.
            case active(Pending)
            /// A stop was requested; the loop takes it after the event at hand. `urgent` once a
            /// second stop request came.
            case stopRequested(TerminationReason, urgent: Bool)
            /// Listeners are stopping (`STOPPING=1` was sent, or start-up failed). `interruption`
            /// is what a second stop request cuts short (the hook running).
            case stopping(urgent: Bool, interruption: (@Sendable () -> Void)?)
            /// Every listener stopped; the loop returned or is returning.
            case stopped
        }

        private struct Guarded {
            var state = State.active(Pending())
            var generation = 1
            var nextProbe = 0
        }

        let notifier: any ServiceManagerNotifier
        let observers: [any LifecycleObserver]
        let logger: Logger
        private let guarded = Mutex(Guarded())
        let doorbell: AsyncStream<Void>
        private let bell: AsyncStream<Void>.Continuation

        init(notifier: any ServiceManagerNotifier, observers: [any LifecycleObserver], logger: Logger) {
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
                    metadata: ["vigil-notify": "\(messages.map(\.description).joined(separator: ", "))"]
                )
            }
        }

        func observe(_ record: LifecycleRecord) {
            for observer in observers { observer.observe(record) }
        }

        // MARK: requests (any thread)

        var generation: Int { guarded.withLock { $0.generation } }

        func commitGeneration(_ generation: Int) { guarded.withLock { $0.generation = generation } }

        /// Asks the loop for `event`: a signal's, a listener's or the daemon's request. Reloads
        /// and user signals are dropped once a stop was requested; a second stop request makes the
        /// stop urgent (the remaining budgets are skipped, the running hook is cut short).
        func request(_ event: LifecycleEvent) {
            var interruption: (@Sendable () -> Void)?
            var unanswered: [@Sendable (Bool) -> Void] = []
            let ring = guarded.withLock { guarded -> Bool in
                switch (event.wrapped, guarded.state) {
                case (.terminate(let reason), .active(let pending)):
                    guarded.state = .stopRequested(reason, urgent: false)
                    // A stopping daemon is not healthy: waiting probes hear so now.
                    unanswered = Array(pending.probes.values)
                    return true
                case (.terminate, .stopRequested(let reason, _)):
                    guarded.state = .stopRequested(reason, urgent: true)
                    return true
                case (.terminate, .stopping(_, let cut)):
                    guarded.state = .stopping(urgent: true, interruption: cut)
                    interruption = cut
                    return true
                case (.reload, .active(var pending)):
                    guarded.state = .stopped  // no copy of `pending` while it changes
                    pending.reload = true
                    guarded.state = .active(pending)
                    return true
                case (.userSignal(let signal), .active(var pending)):
                    guarded.state = .stopped
                    if !pending.userSignals.contains(signal) { pending.userSignals.append(signal) }
                    guarded.state = .active(pending)
                    return true
                case (.memoryPressure, .active(var pending)):
                    guarded.state = .stopped
                    pending.memoryPressure = true
                    guarded.state = .active(pending)
                    return true
                case (.terminate, .stopped), (.reload, _), (.userSignal, _), (.start, _), (.healthProbe, _),
                    (.memoryPressure, _):
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
            let id = guarded.withLock { guarded -> Int? in
                guard case .active(var pending) = guarded.state else { return nil }
                guarded.state = .stopped
                guarded.nextProbe += 1
                pending.probes[guarded.nextProbe] = answer
                guarded.state = .active(pending)
                return guarded.nextProbe
            }
            if id == nil { answer(false) } else { bell.yield() }
            return id
        }

        func cancelProbe(_ id: Int) {
            guarded.withLock { guarded in
                guard case .active(var pending) = guarded.state else { return }
                guarded.state = .stopped
                pending.probes[id] = nil
                guarded.state = .active(pending)
            }
        }

        func takeProbes() -> [@Sendable (Bool) -> Void] {
            guarded.withLock { guarded in
                guard case .active(var pending) = guarded.state else { return [] }
                guarded.state = .stopped
                defer { guarded.state = .active(pending) }
                defer { pending.probes.removeAll() }
                return Array(pending.probes.values)
            }
        }

        /// `true` once a second stop request came.
        var isUrgent: Bool {
            guarded.withLock { guarded in
                switch guarded.state {
                case .stopRequested(_, let urgent), .stopping(let urgent, _): urgent
                case .active, .stopped: false
                }
            }
        }

        /// `true` once listeners are stopping (or start-up failed), and after.
        var isStopping: Bool {
            guarded.withLock { guarded in
                switch guarded.state {
                case .stopping, .stopped: true
                case .active, .stopRequested: false
                }
            }
        }

        /// `true` once a stop was requested (or start-up failed).
        var terminationRequested: Bool {
            guarded.withLock { guarded in
                if case .active = guarded.state { false } else { true }
            }
        }

        /// Start-up failed: listeners stop without a stop request.
        func beginStopping() {
            let probes = guarded.withLock { guarded -> [@Sendable (Bool) -> Void] in
                switch guarded.state {
                case .active(let pending):
                    guarded.state = .stopping(urgent: false, interruption: nil)
                    return Array(pending.probes.values)
                case .stopRequested(_, let urgent):
                    guarded.state = .stopping(urgent: urgent, interruption: nil)
                    return []
                case .stopping, .stopped:
                    return []
                }
            }
            for probe in probes { probe(false) }
        }

        /// Registers what a second stop request should cut short; runs it at once when that request
        /// already came.
        func setInterruption(_ interruption: (@Sendable () -> Void)?) {
            let now = guarded.withLock { guarded -> Bool in
                guard case .stopping(let urgent, _) = guarded.state else { return false }
                guarded.state = .stopping(urgent: urgent, interruption: interruption)
                return urgent
            }
            if now, let interruption { interruption() }
        }

        /// The next event to handle: stopping first, then start, health probes, reloads, user
        /// signals, memory pressure. Taking a stop moves the state to ``State/stopping(urgent:interruption:)``.
        func nextEvent() -> LifecycleEvent? {
            guarded.withLock { guarded -> LifecycleEvent? in
                switch guarded.state {
                case .stopRequested(let reason, let urgent):
                    guarded.state = .stopping(urgent: urgent, interruption: nil)
                    return .terminate(reason)
                case .active(var pending):
                    if pending.start {
                        guarded.state = .stopped
                        pending.start = false
                        guarded.state = .active(pending)
                        return .start
                    }
                    if !pending.probes.isEmpty { return .healthProbe }
                    if pending.reload {
                        guarded.state = .stopped
                        pending.reload = false
                        guarded.state = .active(pending)
                        return .reload
                    }
                    if !pending.userSignals.isEmpty {
                        guarded.state = .stopped
                        let signal = pending.userSignals.removeFirst()
                        guarded.state = .active(pending)
                        return .userSignal(signal)
                    }
                    if pending.memoryPressure {
                        guarded.state = .stopped
                        pending.memoryPressure = false
                        guarded.state = .active(pending)
                        return .memoryPressure
                    }
                    return nil
                case .stopping, .stopped:
                    return nil
                }
            }
        }

        /// Every listener stopped: answers waiting probes and ends the doorbell.
        func finish() {
            let probes = guarded.withLock { guarded -> [@Sendable (Bool) -> Void] in
                defer { guarded.state = .stopped }
                if case .active(let pending) = guarded.state { return Array(pending.probes.values) }
                return []
            }
            for probe in probes { probe(false) }
            bell.finish()
        }
    }
}
