import CoreMetrics

/// What a ``ListenerGroup`` counts and times through swift-metrics — the façade only: the
/// daemon chooses a backend (Prometheus, StatsD, OpenTelemetry) with `MetricsSystem.bootstrap`
/// before it builds the group, or passes a factory in ``ListenerGroup/Configuration/metrics``.
/// With no backend nothing is recorded and hooks are not even timed.
///
/// | name | kind | dimensions | counts or measures |
/// | --- | --- | --- | --- |
/// | `vigil_reloads_total` | counter | `result`: `applied`, `rejected` | reloads, by outcome |
/// | `vigil_start_failures_total` | counter | `listener` | start-ups that failed, by the step at fault |
/// | `vigil_hook_failures_total` | counter | `listener`, `hook`, `kind`: `threw`, `overran`, `interrupted` | hooks that failed and were isolated; `overran` is a budget overrun |
/// | `vigil_hook_duration_seconds` | timer | `listener`, `hook` | how long each hook ran |
/// | `vigil_configuration_generation` | gauge | — | the configuration generation in force |
/// | `vigil_watchdog_pings_withheld_total` | counter | — | watchdog pings withheld because a health probe failed (`Daemon`) |
///
/// `hook` is one of `start`, `prepare-reload`, `commit-reload`, `abort-reload`, `user-signal`,
/// `health`, `terminate`; start-up commands report as `start` under their own name.
struct LifecycleMetrics: Sendable {
    /// The hooks, as the `hook` dimension names them.
    enum Hook: String, CaseIterable, Sendable {
        case start, prepareReload = "prepare-reload", commitReload = "commit-reload"
        case abortReload = "abort-reload", userSignal = "user-signal", health, terminate
        case memoryPressure = "memory-pressure"
    }

    let factory: any MetricsFactory
    private let reloadsApplied: Counter
    private let reloadsRejected: Counter
    private let generation: Gauge
    /// Timers by listener and hook, made once; empty when there is no backend.
    private let timers: [String: [Hook: Timer]]

    /// Metrics for a group of these listeners and start-up commands.
    init(factory: any MetricsFactory, listeners: [String], commands: [String]) {
        self.factory = factory
        reloadsApplied = Counter(label: "vigil_reloads_total", dimensions: [("result", "applied")], factory: factory)
        reloadsRejected = Counter(label: "vigil_reloads_total", dimensions: [("result", "rejected")], factory: factory)
        generation = Gauge(label: "vigil_configuration_generation", dimensions: [], factory: factory)
        guard !(factory is NOOPMetricsHandler) else {
            timers = [:]
            return
        }
        var timers: [String: [Hook: Timer]] = [:]
        for name in listeners {
            timers[name] = Dictionary(
                uniqueKeysWithValues: Hook.allCases.map { hook in
                    (hook, Self.timer(name, hook, factory))
                }
            )
        }
        for name in commands where timers[name] == nil {
            timers[name] = [.start: Self.timer(name, .start, factory)]
        }
        self.timers = timers
    }

    private static func timer(_ listener: String, _ hook: Hook, _ factory: any MetricsFactory) -> Timer {
        Timer(
            label: "vigil_hook_duration_seconds",
            dimensions: [("listener", listener), ("hook", hook.rawValue)],
            preferredDisplayUnit: .seconds,
            factory: factory
        )
    }

    /// Whether hooks are timed (there is a backend).
    var timesHooks: Bool { !timers.isEmpty }

    /// The timer for a hook, or `nil` when there is no backend (so the caller skips the clock).
    func timer(_ listener: String, _ hook: Hook) -> Timer? {
        // Without a backend there are no timers: skip hashing the name on every hook call.
        timers.isEmpty ? nil : timers[listener]?[hook]
    }

    func reloaded(applied: Bool, generation value: Int) {
        (applied ? reloadsApplied : reloadsRejected).increment()
        generation.record(value)
    }

    func started(generation value: Int) { generation.record(value) }

    func startFailed(_ listener: String) {
        Counter(label: "vigil_start_failures_total", dimensions: [("listener", listener)], factory: factory)
            .increment()
    }

    func hookFailed(_ listener: String, _ hook: Hook, kind: String) {
        Counter(
            label: "vigil_hook_failures_total",
            dimensions: [("listener", listener), ("hook", hook.rawValue), ("kind", kind)],
            factory: factory
        ).increment()
    }
}
