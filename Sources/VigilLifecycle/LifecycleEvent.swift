/// One thing asked of a daemon, as the mediator (``ListenerGroup``) takes it and its listeners
/// hear it: what goes **in**. What comes **out**, once the mediator handled it, is a
/// ``LifecycleRecord``.
///
/// A signal becomes its event at once (``SignalMap/event(for:)``); so do ``ListenerGroup``'s and
/// ``ListenerContext``'s `request…` methods. ``start`` is the mediator's first event.
///
/// An open set, modelled on `UnixSignal`: a struct around a private enum, so new events can be
/// added without breaking `switch`es in daemon code.
package struct LifecycleEvent: Hashable, Sendable, CustomStringConvertible {
    /// Internal so the mediator's loop can switch over it; the public surface stays the statics.
    enum Wrapped: Hashable, Sendable {
        case start
        case reload
        case userSignal(ProcessSignal)
        case terminate(TerminationReason)
        case healthProbe
        case memoryPressure
    }

    let wrapped: Wrapped

    private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    /// The daemon is starting: start-up commands run, then listeners start in dependency order.
    /// Always the first event (unless a stop request came first); it cannot be requested.
    package static let start = Self(.start)
    /// Reload the configuration (`SIGHUP` by default): two-phase, prepare then commit or abort.
    package static let reload = Self(.reload)
    /// A user signal arrived (`SIGUSR1` by default; `SIGUSR2` can be mapped too).
    package static func userSignal(_ signal: ProcessSignal) -> Self { Self(.userSignal(signal)) }
    /// Stop: listeners stop in reverse dependency order.
    package static func terminate(_ reason: TerminationReason) -> Self { Self(.terminate(reason)) }
    /// The watchdog's probe: a round trip through the mediator that proves it is not wedged.
    package static let healthProbe = Self(.healthProbe)
    /// The service manager reports memory pressure (`$MEMORY_PRESSURE_WATCH`): release what can
    /// be rebuilt (caches, idle buffers). At most one per ``ListenerGroup/Configuration/memoryPressureInterval``.
    package static let memoryPressure = Self(.memoryPressure)

    /// A short lower-case name for logs and journal fields: `start`, `reload`, `user-signal`,
    /// `terminate`, `health-probe`, `memory-pressure`.
    package var name: String {
        switch wrapped {
        case .start: "start"
        case .reload: "reload"
        case .userSignal: "user-signal"
        case .terminate: "terminate"
        case .healthProbe: "health-probe"
        case .memoryPressure: "memory-pressure"
        }
    }

    package var description: String {
        switch wrapped {
        case .start, .reload, .healthProbe, .memoryPressure: name
        case .userSignal(let signal): "user-signal(\(signal))"
        case .terminate(let reason): "terminate(\(reason))"
        }
    }
}
