import Logging
import VigilLifecycle
import VigilPlatform

/// Logs every lifecycle record as one entry with its `MESSAGE_ID` and `VIGIL_*` fields, so that
/// `journalctl MESSAGE_ID=…` and `journalctl VIGIL_EVENT=reload` find them.
///
/// Fields: `VIGIL_EVENT` (started, reload-applied, …), `VIGIL_GENERATION`, `VIGIL_REASON`,
/// `VIGIL_DURATION_USEC`, `VIGIL_LISTENER`, `VIGIL_VERSION`, `VIGIL_PID`, `VIGIL_UPTIME_USEC`,
/// `VIGIL_SKIPPED` (memory-pressure reports dropped by the rate limit).
package struct LifecycleLogger: LifecycleObserver {
    private let logger: Logger
    private let version: String

    /// Creates an observer that logs to `logger`; `version` goes into the started entry.
    package init(logger: Logger, version: String) {
        self.logger = logger
        self.version = version
    }

    package func observe(_ record: LifecycleRecord) {
        switch record.kind {
        case .started(let generation, let timeToReady):
            log(
                .notice,
                "Started \(version) in \(timeToReady.microseconds / 1000) ms, configuration generation \(generation)",
                .started,
                record.event.name,
                [
                    "VIGIL_GENERATION": "\(generation)", "VIGIL_DURATION_USEC": "\(timeToReady.microseconds)",
                    "VIGIL_VERSION": "\(version)", "VIGIL_PID": "\(getpid())",
                ]
            )
        case .startFailed(let listener, let reason):
            log(
                .critical,
                "Start-up failed in \(listener): \(reason)",
                .startFailed,
                record.event.name,
                ["VIGIL_LISTENER": "\(listener)", "VIGIL_REASON": "\(reason)"]
            )
        case .reloadApplied(let generation, let duration):
            log(
                .notice,
                "Reload applied: configuration generation \(generation) is now in force",
                .reloadApplied,
                record.event.name,
                ["VIGIL_GENERATION": "\(generation)", "VIGIL_DURATION_USEC": "\(duration.microseconds)"]
            )
        case .reloadRejected(let rejection, let generation, let duration):
            log(
                .error,
                "Reload rejected by \(rejection.listener): \(sentence(rejection.reason)) Still running generation \(generation).",
                .reloadRejected,
                record.event.name,
                [
                    "VIGIL_GENERATION": "\(generation)", "VIGIL_LISTENER": "\(rejection.listener)",
                    "VIGIL_REASON": "\(rejection.reason)",
                    "VIGIL_DURATION_USEC": "\(duration.microseconds)",
                ]
            )
        case .userSignal(let signal):
            log(.info, "Handled \(signal)", .userSignal, record.event.name, ["VIGIL_SIGNAL": "\(signal)"])
        case .memoryPressure(let skipped):
            log(
                .notice,
                "Memory pressure reported by the service manager: asked every listener to release what it can"
                    + (skipped > 0 ? " (\(skipped) more report(s) within the rate limit were dropped)" : ""),
                .memoryPressure,
                record.event.name,
                ["VIGIL_SKIPPED": "\(skipped)"]
            )
        case .stopping(let reason):
            log(.notice, "Stopping (\(reason))", .stopping, record.event.name, ["VIGIL_REASON": "\(reason)"])
        case .stopped(let uptime):
            log(
                .notice,
                "Stopped after \(uptime.components.seconds) s",
                .stopped,
                record.event.name,
                ["VIGIL_UPTIME_USEC": "\(uptime.microseconds)"]
            )
        case .listenerFailed:
            break  // the mediator logs these itself, with the listener's name
        case .fatalFault(let listener, let reason):
            log(
                .critical,
                "Fatal fault in \(listener): \(reason); asking systemd to restart the daemon",
                .watchdogFault,
                record.event.name,
                ["VIGIL_LISTENER": "\(listener)", "VIGIL_REASON": "\(reason)"]
            )
        }
    }

    /// Builds the entry only when `level` is logged: a user signal at `info` costs a daemon
    /// logging at `notice` no string and no metadata.
    private func log(
        _ level: Logger.Level,
        _ message: @autoclosure () -> String,
        _ id: LifecycleMessageID,
        _ event: String,
        _ fields: @autoclosure () -> Logger.Metadata
    ) {
        guard logger.logLevel <= level else { return }
        var metadata = fields()
        metadata["MESSAGE_ID"] = .string(id.rawValue)
        metadata["VIGIL_EVENT"] = .string(event)
        logger.log(level: level, "\(message())", metadata: metadata)
    }
}
