import CoreMetrics
import Logging
import ServiceLifecycle
import Synchronization
import VigilLifecycle
import VigilPlatform
import VigilSystemd

/// What a daemon's `main` starts from: the mediator wired to systemd, the signals, the
/// watchdog and the journal.
///
/// ```swift
/// let logging = Daemon.bootstrapLogging(identifier: "mydaemon")
/// let daemon = Daemon(identifier: "mydaemon", version: "1.0", listeners: [config, worker], logging: logging)
/// exit(await daemon.run())
/// ```
///
/// `run()` installs the signal handlers, starts everything, reports `READY=1`, pings the
/// watchdog when `WatchdogSec=` is set (only after a health probe through the mediator), and
/// returns the process's exit status: 0 after a clean stop, 1 when start-up failed or a listener
/// failed to stop cleanly (a final checkpoint that could not be written, say).
public struct Daemon: Sendable {
    /// `SYSLOG_IDENTIFIER` and the name in messages.
    package let identifier: String
    /// The daemon's version, logged at start.
    package let version: String
    /// The listeners, in any order.
    package let listeners: [any Listener]
    /// Steps that run before any listener starts.
    package var startupCommands: [any StartupCommand] = []
    /// Which signals the mediator owns: systemd's conventions (`SIGHUP` reloads, `SIGTERM` and
    /// `SIGINT` stop, `SIGUSR1` and `SIGUSR2` are user signals), which `reload` relies on;
    /// tests own none.
    package var signals: SignalMap
    /// Default listener budgets.
    public var budgets: ListenerBudgets
    /// Values to seed the shared store with.
    package let values: ValueStore
    /// Additional observers of lifecycle records (the lifecycle logger is always there).
    public var observers: [any LifecycleObserver]
    /// Where notifications go; `SystemdNotifier()` unless a test replaces it.
    package var notifier: any ServiceManagerNotifier
    /// The watchdog, from `WATCHDOG_USEC`/`WATCHDOG_PID` unless set.
    package var watchdog: Watchdog?
    /// Where the lifecycle metrics go (`LifecycleMetrics` lists them): swift-metrics' bootstrapped
    /// factory, as it is when the daemon is created, unless set.
    public var metrics: any MetricsFactory
    /// The logging set-up from ``bootstrapLogging(identifier:level:)``.
    package let logging: DaemonLogging
    /// How long ``run()`` waits at its end, when it must, for the service manager to confirm that
    /// it processed the last notifications (`STOPPING=1`, the final `STATUS=`): `BARRIER=1`, see
    /// `SystemdNotifier.barrier(timeout:)`. It must when notifications still wait in the process
    /// (systemd's queue was full) or the process is not the one systemd started
    /// (`SYSTEMD_EXEC_PID`); otherwise everything sent is in systemd's queue, which systemd reads
    /// before it handles the exit, and the exit waits for nothing. 1 s unless set; a frozen
    /// manager delays such an exit by at most this much.
    package var exitBarrierTimeout: Duration = .seconds(1)
    /// The clock of the group's budgets and probes and of the watchdog's rounds: the monotonic
    /// clock, or a test's (VigilTesting's `TestClock`) that the test advances by hand.
    package var clock: LoopClock = .monotonic

    /// Bootstraps swift-log once for the process: native journal entries when stderr is the
    /// journal, `<N>` lines under systemd otherwise, readable lines on a terminal.
    ///
    /// - Important: Process-wide; call it once, first thing in `main`. A second call bootstraps
    ///   nothing and returns the first one's logging (swift-log takes one bootstrap per process,
    ///   and traps on a second; ``DaemonCommandLine`` calls this for `run`).
    public static func bootstrapLogging(identifier: String, level: Logger.Level = .info) -> DaemonLogging {
        bootstrapLogging(identifier: identifier, destination: .automatic(), level: level)
    }

    /// ``bootstrapLogging(identifier:level:)`` to a destination of the caller's choice (tests).
    package static func bootstrapLogging(
        identifier: String,
        destination: LogDestination,
        level: Logger.Level = .info
    ) -> DaemonLogging {
        bootstrapped.withLock { first in
            if let first { return first }
            let control = LogLevelControl(level)
            LoggingSystem.bootstrap { label in
                destination.makeHandler(label: label, identifier: identifier, levelControl: control)
            }
            let logging = DaemonLogging(
                levelControl: control,
                logger: Logger(label: identifier),
                destination: destination
            )
            first = logging
            return logging
        }
    }

    /// The logging of the first ``bootstrapLogging(identifier:level:)`` in this process.
    private static let bootstrapped = Mutex<DaemonLogging?>(nil)

    /// Creates a daemon.
    ///
    /// A long-running part (an HTTP server, a queue consumer) is a `ServiceListener` among
    /// the `listeners`: its start completes when it says it is ready, so `READY=1` follows it.
    public init(
        identifier: String,
        version: String,
        listeners: [any Listener],
        values: ValueStore = ValueStore(),
        logging: DaemonLogging
    ) {
        self.identifier = identifier
        self.version = version
        self.listeners = listeners
        self.values = values
        self.logging = logging
        self.signals = .default
        self.budgets = ListenerBudgets()
        self.observers = []
        self.notifier = SystemdNotifier()
        self.watchdog = Watchdog.fromEnvironment()
        self.metrics = MetricsSystem.factory
    }

    /// Runs the daemon until it is told to stop; returns the exit status (0 clean, 1 when start-up
    /// failed or a listener failed to stop). One daemon runs in a process at a time: it owns the
    /// process's stop and reload signals, and a second one run meanwhile fails to start.
    public func run() async -> Int32 { await run(whenCreated: { _ in }) == nil ? 0 : 1 }

    /// `run()` for VigilTesting's `withRunningDaemon`, which drives the group and needs the
    /// error: hands over the group once it exists; returns why the run failed, `nil` after a
    /// clean stop.
    package func run(whenCreated: (ListenerGroup) -> Void) async -> (any Error)? {
        // Done already by VigilEarlySignals or the event loop; this is for a daemon with neither.
        EventLoopExecutor.openMissingStandardDescriptors()
        let failure = await runGroup(whenCreated: whenCreated)
        // Stopped: the helper threads end now (while a barrier, if the exit needs one, is
        // confirmed), not during the exit.
        BlockingWorker.retireAllIdleThreads()
        synchronizeWithServiceManager()
        return failure
    }

    /// Waits (at most ``exitBarrierTimeout``) until the service manager has processed what was
    /// sent, when that is needed: datagrams still queued on the notifier's helper thread would
    /// die with the process (see ``exitBarrierTimeout``).
    private func synchronizeWithServiceManager() {
        do {
            if try !notifier.synchronize(timeout: exitBarrierTimeout) {
                logging.logger.warning(
                    "The service manager did not confirm the last notifications within \(exitBarrierTimeout) (BARRIER=1); it may not have seen the final status"
                )
            }
        } catch {
            logging.logger.warning("Could not wait for the service manager to confirm the last notifications: \(error)")
        }
    }

    private func runGroup(whenCreated: (ListenerGroup) -> Void) async -> (any Error)? {
        let logger = logging.logger
        // DaemonCommandLine refuses first; a daemon run without it is held to the same floor.
        if let shortage = Self.stackShortage() {
            logger.critical("\(identifier) cannot start: \(shortage)")
            try? notifier.notify([.status("Cannot start: \(shortage)")])
            return StackTooSmall(description: shortage)
        }
        if watchdog == nil, let problem = Watchdog.environmentProblem(environment: Watchdog.processEnvironment) {
            logger.warning("\(problem)")
        }
        if let watchdog, let reason = watchdog.tooShort {
            logger.critical("\(identifier) cannot start: \(reason)")
            try? notifier.notify([.status("Cannot start: \(reason)")])
            return WatchdogTooShort(description: reason)
        }
        let group: ListenerGroup
        do {
            var configuration = ListenerGroup.Configuration(
                logger: logger,
                signals: signals,
                budgets: budgets,
                observers: [LifecycleLogger(logger: logger, version: version)] + observers,
                values: values,
                metrics: metrics,
                maximumHealthBudget: watchdog?.probeTimeout
            )
            configuration.notifier = notifier
            configuration.clock = clock
            group = try ListenerGroup(
                listeners: listeners,
                startupCommands: startupCommands,
                configuration: configuration
            )
        } catch {
            logger.critical("\(identifier) cannot start: \(error)")
            try? notifier.notify([.status("Cannot start: \(error)")])
            return error
        }
        whenCreated(group)
        let pressure = Self.watchMemoryPressure(for: group, logger: logger)
        defer { pressure?.cancel() }
        if let watchdog, let warning = Self.healthBudgetWarning(group.healthBudgetsOverLimit, watchdog: watchdog) {
            logger.warning("\(warning)")
        }
        // Counted in LifecycleMetrics' table (vigil_watchdog_pings_withheld_total).
        let withheld = Counter(label: "vigil_watchdog_pings_withheld_total", factory: metrics)
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                if let watchdog {
                    tasks.addTask { [notifier, clock] in
                        await watchdog.run(
                            probe: { timeout in
                                // Quiet once a stop is under way: the mediator answers no
                                // probe after a stop request, and systemd expects no ping after
                                // STOPPING=1 (a stop that waits for a slow hook to end first is
                                // bounded by that hook's budget).
                                let stopping = { group.terminationRequested || group.isStopping }
                                if stopping() { return .stopping }
                                if !group.hasStarted { return .starting }
                                if await group.probeHealth(timeout: timeout) { return .healthy }
                                return stopping() ? .stopping : .unhealthy
                            },
                            ping: {
                                do {
                                    try notifier.notify([.watchdog])
                                } catch {
                                    logger.error("Could not ping the watchdog: \(error)")
                                }
                            },
                            missed: {
                                withheld.increment()
                                logger.error(
                                    "Health probe failed: withholding the watchdog ping; systemd will restart the daemon if this persists",
                                    metadata: ["MESSAGE_ID": .string(LifecycleMessageID.watchdogFault.rawValue)]
                                )
                            },
                            clock: clock
                        )
                    }
                }
                try await group.run()
                tasks.cancelAll()
            }
            return nil
        } catch let error as ListenerGroupError where error.code == .stopFailed {
            logger.critical(
                "\(error)",
                metadata: [
                    "MESSAGE_ID": .string(LifecycleMessageID.stopFailed.rawValue), "VIGIL_EVENT": "stop-failed",
                    "VIGIL_LISTENER": .string(error.listener ?? ""),
                ]
            )
            return error
        } catch let error as ListenerGroupError where error.code == .startFailed && error.listener != nil {
            // The lifecycle logger wrote it already, as the start-failed entry with its
            // MESSAGE_ID: a second line would say the same.
            return error
        } catch {
            logger.critical("\(error)")
            return error
        }
    }
}

extension Daemon {
    /// The least stack a command that reads JSON needs: the configuration, state and status
    /// files may nest arrays and objects 256 levels deep, and their parser, writer and decoder
    /// recurse once a level. Measured with such files (November 2026): the packaged release build
    /// parses and writes them in 128 KiB (and crashed in 64), a debug build needs 768 KiB; below,
    /// a file nested that deep made the process crash (SIGSEGV) instead of refusing it. Twice
    /// what a release build needs, and a debug build's with a quarter to spare.
    package static var stackNeeded: Int {
        #if DEBUG
            1024 * 1024
        #else
            256 * 1024
        #endif
    }

    /// Why this process's `RLIMIT_STACK` is too small for ``stackNeeded``, or `nil`. The main
    /// thread's stack grows up to it, and glibc sizes the threads it starts by it (read once, as
    /// the process began; musl gives them 128 KiB whatever it says): so it is checked, not
    /// raised, before any command that reads JSON.
    package static func stackShortage() -> String? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_STACK.rawValue), &limit) == 0 else { return nil }
        guard limit.rlim_cur != rlim_t.max, limit.rlim_cur < rlim_t(stackNeeded) else { return nil }
        return "its stack may grow to only \(limit.rlim_cur / 1024) KiB (RLIMIT_STACK) and needs at least "
            + "\(stackNeeded / 1024) KiB: it reads JSON nested up to 256 levels deep (the configuration, state and "
            + "status files), and with less a file nested that deep would crash it. Raise LimitSTACK= in the unit "
            + "(or ulimit -s) to \(stackNeeded / 1024) KiB or more (8192 KiB is the usual default)"
    }

    /// Watches `$MEMORY_PRESSURE_WATCH` (systemd's `MemoryPressureWatch=`) for `group`; `nil`
    /// when it is unset or `/dev/null`, or cannot be watched (a warning says why: the daemon
    /// runs on without it).
    static func watchMemoryPressure(for group: ListenerGroup, logger: Logger) -> MemoryPressureWatch? {
        do {
            guard let watch = try MemoryPressureWatch.fromEnvironment(handler: { group.requestMemoryPressure() }) else {
                return nil
            }
            let trigger =
                watch.kind == .pressureFile && !watch.written.isEmpty
                ? " with the trigger '\(MemoryPressureWatch.text(watch.written))'" : ""
            let unwritten =
                watch.unwritten.isEmpty
                ? ""
                : " (MEMORY_PRESSURE_WRITE's '\(MemoryPressureWatch.text(watch.unwritten))' is not written to a FIFO: "
                    + "the daemon would read it back as pressure)"
            logger.info("Watching memory pressure: \(watch.kind.rawValue) \(watch.path)\(trigger)\(unwritten)")
            return watch
        } catch {
            logger.warning(
                "Not watching memory pressure: \(error). Set MemoryPressureWatch=auto (or off) in the unit, or fix MEMORY_PRESSURE_WATCH."
            )
            return nil
        }
    }

    /// The one warning for health budgets that exceed the watchdog probe's timeout, naming each
    /// listener whose budget was cut to it; `nil` when none was.
    package static func healthBudgetWarning(
        _ overLimit: [(listener: String, health: Duration)],
        watchdog: Watchdog
    ) -> String? {
        guard !overLimit.isEmpty else { return nil }
        let names = overLimit.map { "'\($0.listener)' (\($0.health))" }.joined(separator: ", ")
        return "Health budget longer than the watchdog probe's timeout of \(watchdog.probeTimeout) "
            + "(a quarter of WatchdogSec=\(watchdog.interval)): \(names); cut to \(watchdog.probeTimeout). "
            + "Give these listeners a shorter health budget (ListenerBudgets.health), or raise WatchdogSec=."
    }
}

/// A daemon's logging as bootstrapped (``Daemon/bootstrapLogging(identifier:level:)``):
/// the shared level control, the daemon's logger and where entries go.
public struct DaemonLogging: Sendable {
    /// The level shared by every handler.
    package let levelControl: LogLevelControl
    /// The daemon's logger.
    package let logger: Logger

    /// The level of every handler: set it to change what every logger of the process logs,
    /// at once (the `LoggingListener` sets it from the configuration).
    public var level: Logger.Level {
        get { levelControl.level }
        nonmutating set { levelControl.level = newValue }
    }
    /// Where entries go.
    package let destination: LogDestination

    /// Wraps a logging set-up made elsewhere (tests, or a daemon with its own handlers).
    package init(levelControl: LogLevelControl, logger: Logger, destination: LogDestination) {
        self.levelControl = levelControl
        self.logger = logger
        self.destination = destination
    }
}

/// The watchdog systemd asked for is shorter than ``Watchdog/minimumInterval``.
struct WatchdogTooShort: Error, CustomStringConvertible {
    var description: String
}

/// The stack limit is below what reading the daemon's JSON files needs.
struct StackTooSmall: Error, CustomStringConvertible {
    var description: String
}
