import Logging
import Synchronization

/// The mediator's shared core: pending requests, the doorbell that wakes the event loop, and
/// the outlets (service manager, observers). Requests may come from any thread (signal
/// handlers, listeners, the watchdog); the loop in ``ListenerGroup`` takes them one at a time.
final class MediatorCore: Sendable {
    enum Phase: Sendable { case idle, starting, running, stopping, stopped }

    struct State {
        var phase = Phase.idle
        /// Reload requested; any number of requests while one is pending collapse into it.
        var reloadRequested = false
        /// User signals requested, each at most once while pending (standard signals coalesce).
        var userSignals: [ProcessSignal] = []
        var termination: TerminationReason?
        var terminationTaken = false
        /// A second stop request arrived: skip the remaining budgets.
        var urgent = false
        var interruption: (@Sendable () -> Void)?
        var probes: [Int: @Sendable (Bool) -> Void] = [:]
        var nextProbe = 0
        var generation = 1
    }

    let notifier: any ServiceManagerNotifier
    let observers: [any LifecycleObserver]
    let logger: Logger
    private let state = Mutex(State())
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
                metadata: ["vigil-notify": "\(NotifyMessage.datagram(messages))"]
            )
        }
    }

    func observe(_ record: LifecycleRecord) {
        for observer in observers { observer.observe(record) }
    }

    // MARK: requests (any thread)

    var generation: Int { state.withLock { $0.generation } }

    func setPhase(_ phase: Phase) { state.withLock { $0.phase = phase } }

    func commitGeneration(_ generation: Int) { state.withLock { $0.generation = generation } }

    func requestReload() {
        let ring = state.withLock { state -> Bool in
            guard state.termination == nil else { return false }
            state.reloadRequested = true
            return true
        }
        if ring { bell.yield() }
    }

    func requestUserSignal(_ signal: ProcessSignal) {
        let ring = state.withLock { state -> Bool in
            guard state.termination == nil else { return false }
            if !state.userSignals.contains(signal) { state.userSignals.append(signal) }
            return true
        }
        if ring { bell.yield() }
    }

    func requestTermination(_ reason: TerminationReason) {
        let interruption = state.withLock { state -> (@Sendable () -> Void)? in
            if state.termination == nil {
                state.termination = reason
                return nil
            }
            state.urgent = true
            return state.interruption
        }
        interruption?()
        bell.yield()
    }

    /// Asks the loop to answer a health probe; `answer` is called once, with `false` if the
    /// daemon is stopping.
    func requestProbe(_ answer: @escaping @Sendable (Bool) -> Void) -> Int? {
        let id = state.withLock { state -> Int? in
            guard state.termination == nil, state.phase != .stopped else { return nil }
            state.nextProbe += 1
            state.probes[state.nextProbe] = answer
            return state.nextProbe
        }
        if id == nil { answer(false) } else { bell.yield() }
        return id
    }

    func cancelProbe(_ id: Int) {
        _ = state.withLock { $0.probes.removeValue(forKey: id) }
    }

    func takeProbes() -> [@Sendable (Bool) -> Void] {
        state.withLock { state in
            defer { state.probes.removeAll() }
            return Array(state.probes.values)
        }
    }

    var isUrgent: Bool { state.withLock { $0.urgent } }

    var isStopping: Bool { state.withLock { $0.phase == .stopping || $0.phase == .stopped } }

    var terminationRequested: Bool { state.withLock { $0.termination != nil } }

    /// Registers what a second stop request should cut short; runs it at once when that request
    /// already came.
    func setInterruption(_ interruption: (@Sendable () -> Void)?) {
        let now = state.withLock { state -> Bool in
            state.interruption = interruption
            return state.urgent
        }
        if now, let interruption { interruption() }
    }

    /// The next event to handle: stopping first, then health probes, reloads, user signals.
    func nextEvent() -> LifecycleEvent? {
        state.withLock { state in
            if let reason = state.termination, !state.terminationTaken {
                state.terminationTaken = true
                return .terminate(reason)
            }
            if state.termination != nil { return nil }
            if !state.probes.isEmpty { return .healthProbe }
            if state.reloadRequested {
                state.reloadRequested = false
                return .reload
            }
            if !state.userSignals.isEmpty { return .userSignal(state.userSignals.removeFirst()) }
            return nil
        }
    }

    func finish() {
        setPhase(.stopped)
        for probe in takeProbes() { probe(false) }
        bell.finish()
    }
}
