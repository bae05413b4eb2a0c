/// How long one listener may take for each hook before it is isolated as overrunning.
///
/// Keep the sum of start budgets under the unit's `TimeoutStartSec=` (the mediator sends
/// `EXTEND_TIMEOUT_USEC=` while a step legitimately runs long), the sum of terminate budgets
/// (plus the daemon's 1 s exit barrier) under `TimeoutStopSec=` (declare it with `Vigil`'s
/// `SystemdUnit(stopTimeout:)`; a Vigil daemon's `run` warns when the budgets outgrow it), and the
/// reload and health budgets under half of `WatchdogSec=`.
public struct ListenerBudgets: Sendable, Hashable {
    /// Start-up commands and `start`.
    public var start: Duration
    /// Each reload phase (prepare, commit, abort).
    public var reload: Duration
    /// `userSignal`.
    public var userSignal: Duration
    /// `terminate`.
    public var terminate: Duration
    /// `checkHealth`, the watchdog's probe.
    public var health: Duration
    /// `memoryPressure`.
    public var memoryPressure: Duration

    /// Creates budgets; the defaults suit a unit with the default 90 s timeouts.
    public init(
        start: Duration = .seconds(30),
        reload: Duration = .seconds(10),
        userSignal: Duration = .seconds(10),
        terminate: Duration = .seconds(10),
        health: Duration = .seconds(2),
        memoryPressure: Duration = .seconds(5)
    ) {
        self.start = start
        self.reload = reload
        self.userSignal = userSignal
        self.terminate = terminate
        self.health = health
        self.memoryPressure = memoryPressure
    }
}
