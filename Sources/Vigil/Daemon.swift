import CoreMetrics
import Logging
import ServiceLifecycle
import VigilLifecycle
import VigilSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

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
    public let identifier: String
    /// The daemon's version, logged at start.
    public let version: String
    /// The listeners, in any order.
    public let listeners: [any Listener]
    /// Steps that run before any listener starts.
    public var startupCommands: [any StartupCommand]
    /// Other swift-service-lifecycle services to run alongside (an HTTP server, say); they shut
    /// down gracefully when the daemon stops.
    public let services: [any Service]
    /// Signals, budgets and shared values for the mediator.
    public var signals: SignalMap
    /// Default listener budgets.
    public var budgets: ListenerBudgets
    /// Values to seed the shared store with.
    public let values: ValueStore
    /// Additional observers of lifecycle records (the lifecycle logger is always there).
    public var observers: [any LifecycleObserver]
    /// Where notifications go; `SystemdNotifier()` unless a test replaces it.
    public var notifier: any ServiceManagerNotifier
    /// The watchdog, from `WATCHDOG_USEC`/`WATCHDOG_PID` unless set.
    public var watchdog: Watchdog?
    /// Where the lifecycle metrics go (``LifecycleMetrics`` lists them): swift-metrics' bootstrapped
    /// factory, as it is when the daemon is created, unless set.
    public var metrics: any MetricsFactory
    /// The logging set-up from ``bootstrapLogging(identifier:destination:level:)``.
    public let logging: Logging

    /// Logging as bootstrapped: the shared level control and the daemon's logger.
    public struct Logging: Sendable {
        /// Change the level of every handler at run time.
        public let levelControl: LogLevelControl
        /// The daemon's logger.
        public let logger: Logger
        /// Where entries go.
        public let destination: LogDestination

        /// Wraps a logging set-up made elsewhere (tests, or a daemon with its own handlers).
        public init(levelControl: LogLevelControl, logger: Logger, destination: LogDestination) {
            self.levelControl = levelControl
            self.logger = logger
            self.destination = destination
        }
    }

    /// Bootstraps swift-log once for the process: native journal entries when stderr is the
    /// journal, `<N>` lines under systemd otherwise, readable lines on a terminal.
    ///
    /// - Important: Process-wide; call it once, first thing in `main`.
    public static func bootstrapLogging(
        identifier: String,
        destination: LogDestination = .automatic(),
        level: Logger.Level = .info
    ) -> Logging {
        let control = LogLevelControl(level)
        LoggingSystem.bootstrap { label in
            destination.makeHandler(label: label, identifier: identifier, levelControl: control)
        }
        return Logging(levelControl: control, logger: Logger(label: identifier), destination: destination)
    }

    /// Creates a daemon.
    public init(
        identifier: String,
        version: String,
        listeners: [any Listener],
        startupCommands: [any StartupCommand] = [],
        services: [any Service] = [],
        values: ValueStore = ValueStore(),
        logging: Logging
    ) {
        self.identifier = identifier
        self.version = version
        self.listeners = listeners
        self.startupCommands = startupCommands
        self.services = services
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
    /// failed or a listener failed to stop).
    public func run() async -> Int32 {
        let logger = logging.logger
        let group: ListenerGroup
        do {
            group = try ListenerGroup(
                listeners: listeners,
                startupCommands: startupCommands,
                configuration: .init(
                    logger: logger,
                    notifier: notifier,
                    signals: signals,
                    budgets: budgets,
                    observers: [LifecycleLogger(logger: logger, version: version)] + observers,
                    values: values,
                    metrics: metrics
                )
            )
        } catch {
            logger.critical("\(identifier) cannot start: \(error)")
            try? notifier.notify([.status("Cannot start: \(error)")])
            return 1
        }
        // Counted in LifecycleMetrics' table (vigil_watchdog_pings_withheld_total).
        let withheld = Counter(label: "vigil_watchdog_pings_withheld_total", factory: metrics)
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                if let watchdog {
                    tasks.addTask { [notifier] in
                        await watchdog.run(
                            probe: { timeout in await group.probeHealth(timeout: timeout) },
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
                            sleep: { try await EventLoopExecutor.sleep(for: $0) }
                        )
                    }
                }
                if services.isEmpty {
                    try await group.run()
                } else {
                    let serviceGroup = ServiceGroup(
                        configuration: .init(
                            services: [group.serviceConfiguration]
                                + services.map {
                                    .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup)
                                },
                            logger: logger
                        )
                    )
                    try await serviceGroup.run()
                }
                tasks.cancelAll()
            }
            return 0
        } catch let error as ListenerGroupError where error.code == .stopFailed {
            logger.critical(
                "\(error)",
                metadata: [
                    "MESSAGE_ID": .string(LifecycleMessageID.stopFailed.rawValue), "VIGIL_EVENT": "stop-failed",
                    "VIGIL_LISTENER": .string(error.listener ?? ""),
                ]
            )
            return 1
        } catch {
            logger.critical("\(error)")
            return 1
        }
    }
}
