/// What happened, as the mediator reports it to its observers after each step: what comes
/// **out** of a `LifecycleEvent` (what went in).
///
/// Opaque, as swift-service-lifecycle's `UnixSignal` is: compare ``event`` with the static
/// members of ``Event``, so that a kind of record added later breaks no observer's `switch`.
///
/// ```swift
/// struct ReloadWatcher: LifecycleObserver {
///     func observe(_ record: LifecycleRecord) {
///         if record.event == .reloadRejected { print("a reload was rejected") }
///     }
/// }
/// ```
///
/// The logging listener turns these into journal entries with `MESSAGE_ID`s; the reference
/// daemon records them in its runtime status.
public struct LifecycleRecord: Sendable, Hashable {
    /// What kind of step a record reports; compare with the static members.
    public struct Event: Hashable, Sendable {
        /// As the journal's `VIGIL_EVENT` field spells it: `reload-applied`.
        package let name: String
        private init(_ name: String) { self.name = name }

        /// Every listener started; `READY=1` was sent.
        public static let started = Self("started")
        /// Start-up failed in the named step or listener.
        package static let startFailed = Self("start-failed")
        /// A reload was applied; its generation is now current.
        public static let reloadApplied = Self("reload-applied")
        /// A reload was rejected; the generation in force is unchanged.
        public static let reloadRejected = Self("reload-rejected")
        /// A user signal was delivered to every listener.
        public static let userSignal = Self("user-signal")
        /// A memory-pressure event was delivered to every listener.
        package static let memoryPressure = Self("memory-pressure")
        /// Shutdown began.
        package static let stopping = Self("stopping")
        /// Every listener stopped (one a second stop request cut short counts as stopped).
        package static let stopped = Self("stopped")
        /// A listener's hook threw or overran and was isolated; the others still heard the event.
        package static let listenerFailed = Self("listener-failed")
        /// A listener declared a fatal fault; `WATCHDOG=trigger` was sent.
        package static let fatalFault = Self("fatal-fault")
    }

    /// The record with everything it carries, for the package's observers (the lifecycle
    /// logger, the runtime status) and tests.
    package enum Kind: Sendable, Hashable {
        /// Every listener started; `READY=1` was sent.
        case started(generation: Int, timeToReady: Duration)
        /// Start-up failed in the named step or listener.
        case startFailed(listener: String, reason: String)
        /// A reload was applied; `generation` is now current.
        case reloadApplied(generation: Int, duration: Duration)
        /// A reload was rejected; `generation` is still current.
        case reloadRejected(ReloadTransaction.Rejection, generation: Int, duration: Duration)
        /// A user signal was delivered to every listener.
        case userSignal(ProcessSignal)
        /// A memory-pressure event was delivered to every listener; `skipped` reports were
        /// dropped by the rate limit since the previous one of these records.
        case memoryPressure(skipped: Int)
        /// Shutdown began.
        case stopping(TerminationReason)
        /// Every listener stopped (one a second stop request cut short counts as stopped).
        case stopped(uptime: Duration)
        /// A listener's hook threw or overran and was isolated; the others still heard the event.
        case listenerFailed(listener: String, event: String, reason: String)
        /// A listener declared a fatal fault; `WATCHDOG=trigger` was sent.
        case fatalFault(listener: String, reason: String)
    }

    /// What the record reports, with its payload.
    package let kind: Kind

    package init(_ kind: Kind) { self.kind = kind }

    /// What kind of step this record reports.
    public var event: Event {
        switch kind {
        case .started: .started
        case .startFailed: .startFailed
        case .reloadApplied: .reloadApplied
        case .reloadRejected: .reloadRejected
        case .userSignal: .userSignal
        case .memoryPressure: .memoryPressure
        case .stopping: .stopping
        case .stopped: .stopped
        case .listenerFailed: .listenerFailed
        case .fatalFault: .fatalFault
        }
    }

    /// The configuration generation in force after the step: `started`, `reloadApplied`,
    /// `reloadRejected` (the one still in force); `nil` for the others.
    package var generation: Int? {
        switch kind {
        case .started(let generation, _), .reloadApplied(let generation, _), .reloadRejected(_, let generation, _):
            generation
        default: nil
        }
    }

    /// The listener (or start-up step) at fault: `startFailed`, `reloadRejected`,
    /// `listenerFailed`, `fatalFault`; `nil` for the others.
    package var listener: String? {
        switch kind {
        case .startFailed(let listener, _), .listenerFailed(let listener, _, _), .fatalFault(let listener, _):
            listener
        case .reloadRejected(let rejection, _, _): rejection.listener
        default: nil
        }
    }

    /// Why, in words an admin can act on: the failure or rejection's reason, the stop's reason
    /// (`SIGTERM`, or what code gave), the signal delivered; `nil` for the others.
    package var reason: String? {
        switch kind {
        case .startFailed(_, let reason), .listenerFailed(_, _, let reason), .fatalFault(_, let reason):
            reason
        case .reloadRejected(let rejection, _, _): rejection.reason
        case .stopping(let reason): reason.description
        case .userSignal(let signal): signal.description
        default: nil
        }
    }

    /// One line: the event, then what it carries (`reload-rejected generation 1 configuration:
    /// the port is in use`).
    package var line: String {
        var line = event.name
        if let generation { line += " generation \(generation)" }
        switch (listener, reason) {
        case (let listener?, let reason?): line += " \(listener): \(reason)"
        case (let listener?, nil): line += " \(listener)"
        case (nil, let reason?): line += " \(reason)"
        case (nil, nil): break
        }
        return line
    }
}

/// Hears the mediator's ``LifecycleRecord``s, synchronously and in order.
public protocol LifecycleObserver: Sendable {
    /// Called once per record on the mediator's task: keep it short and never block.
    func observe(_ record: LifecycleRecord)
}

extension LifecycleObserver {
    /// Hands the observer the record of `kind` (the package's tests feed observers so).
    package func observe(_ kind: LifecycleRecord.Kind) { observe(LifecycleRecord(kind)) }
}
